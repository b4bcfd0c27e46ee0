-- The agent inside the editor: tool approval as a diff (pi/approveTool), the
-- editor's diagnostics for files a turn changed (pi/diagnostics), code sent
-- with a prompt (:PiSend, :PiAddFile), and the file buffers the server syncs
-- (so the agent reads unsaved text and edits through workspace/applyEdit).
local config = require("pi_lsp.config")
local util = require("pi_lsp.util")
local visible = require("pi_lsp.visible").visible

local M = {}

M.CAPABILITIES = { experimental = { piLsp = { approveTool = true, diagnostics = true } } }
local SETTLE_MS = 500 -- language servers check a change a moment after it lands

-- -- approval -----------------------------------------------------------------------------------

local CHOICES = {
  { title = "Allow", decision = "allow" },
  { title = "Allow for this session", decision = "allowSession" },
  { title = "Deny", decision = "deny" },
}
local ANSWERS = { allow = "Allow", allowSession = "Allow for this session", deny = "Deny" }

--- Whether to offer "Allow for this session": not where the server would not
--- remember it (a change to an editor's settings, asked every time), yes when
--- an older server does not say.
local function for_session(params)
  return params.allowForSession ~= false
end

--- What "Allow for this session" covers where the server says (a call outside
--- the workspace: a folder and below, or the file alone), or nil. The path is
--- the model's: made visible, on one line.
local function session_scope(params)
  local scope = params.sessionScope
  if type(scope) ~= "string" or not for_session(params) then
    return nil
  end
  return scope == params.path and "this file only"
    or ("files in %s and below only"):format(util.one_line(visible(scope)))
end

--- An answer's name, with what it covers for "Allow for this session".
local function answer_title(title, decision, params)
  local scope = decision == "allowSession" and session_scope(params)
  return scope and ("%s (%s)"):format(title, scope) or title
end

local function relative(path, root)
  if root and vim.startswith(path, root .. "/") then
    return path:sub(#root + 2)
  end
  return path
end

--- The question: the tool and what it touches, then the session's title (a
--- repository may have chosen it, so it never comes first). What the model
--- or the repository wrote is made visible: nothing in it may hide the rest.
function M.approval_message(params, root)
  local where = params.outsideWorkspace and " (outside the workspace)" or ""
  local title = visible(params.title)
  if params.tool == "bash" then
    return ("pi wants to run bash%s: %s (session: %s)"):format(where, visible(params.command), title)
  end
  local verb = params.tool
  if verb == "write" then
    verb = (params.oldText == nil or params.oldText == vim.NIL) and "create" or "overwrite"
  end
  return ("pi wants to %s %s%s (session: %s)"):format(verb, visible(relative(params.path or "a file", root)), where, title)
end

--- One side of a proposed change, named "notes.py (proposed)": the tab line
--- shortens every directory of a name, so a path-like name would read
--- "p//a/t/p/notes.py". A second open question on the same file gets " 2".
local function side(name, which, text, filetype)
  local buf = vim.api.nvim_create_buf(false, true)
  local wanted, n = ("%s (%s)"):format(name, which), 1
  while not pcall(vim.api.nvim_buf_set_name, buf, wanted) do
    n = n + 1
    wanted = ("%s (%s %d)"):format(name, which, n)
  end
  vim.bo[buf].filetype = filetype
  -- A file's CRLF line ends (the server sends its text as it is) are shown as lines, not ^M.
  local shown = type(text) == "string" and text:gsub("\r\n", "\n"):gsub("\n$", "") or ""
  util.set_lines(buf, 0, -1, util.split_lines(shown))
  return buf
end

--- Open the current text and the proposed one side by side (current |
--- proposed, as VS Code shows them) in a new tab, in diff mode and normal
--- mode; `answer(decision)` is called once, from a key or the tab closing.
function M.show_diff(params, message, answer)
  local name = vim.fs.basename(params.path or "file")
  local filetype = vim.filetype.match({ filename = name }) or ""
  local from, from_tab = vim.api.nvim_get_current_win(), vim.api.nvim_get_current_tabpage()
  vim.cmd("tabnew")
  local tab = vim.api.nvim_get_current_tabpage()
  local current = side(name, "current", params.oldText, filetype)
  local proposed = side(name, "proposed", params.newText, filetype)
  vim.api.nvim_win_set_buf(0, current)
  vim.cmd("diffthis")
  vim.cmd("rightbelow vsplit")
  vim.api.nvim_win_set_buf(0, proposed)
  vim.cmd("diffthis")
  -- The question may come while the user types (e.g. after <C-s> in the chat
  -- input): its keys are normal-mode keys, so `a` must accept, not insert.
  vim.cmd("stopinsert")
  local keys = config.options.approval.keys
  local answers = { keys.accept .. " accept" }
  if for_session(params) then
    answers[#answers + 1] = answer_title(keys.accept_session .. " accept for session", "allowSession", params)
  end
  answers[#answers + 1] = keys.reject .. " reject"
  -- The winbar reads % as its own items: the message and the scope are the model's text.
  local hint = (message .. " · " .. table.concat(answers, " · ")):gsub("%%", "%%%%")
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(tab)) do
    vim.wo[win].winbar = hint
  end
  local done = false
  local function finish(decision)
    if done then
      return
    end
    done = true
    if vim.api.nvim_tabpage_is_valid(tab) and #vim.api.nvim_list_tabpages() > 1 then
      local shown = vim.api.nvim_get_current_tabpage() == tab
      vim.cmd.tabclose(vim.api.nvim_tabpage_get_number(tab))
      -- :tabclose goes to the next tab: back to the window the question took the user from,
      -- or, closed meanwhile (a float that closes when left, say), to its tab.
      if shown and vim.api.nvim_win_is_valid(from) then
        vim.api.nvim_set_current_win(from)
      elseif shown and vim.api.nvim_tabpage_is_valid(from_tab) then
        vim.api.nvim_set_current_tabpage(from_tab)
      end
    end
    for _, buf in ipairs({ current, proposed }) do
      if vim.api.nvim_buf_is_valid(buf) then
        vim.api.nvim_buf_delete(buf, { force = true })
      end
    end
    answer(decision)
  end
  for _, buf in ipairs({ current, proposed }) do
    util.map(buf, "n", keys.accept, function()
      finish("allow")
    end, "pi: accept this change")
    if for_session(params) then
      util.map(buf, "n", keys.accept_session, function()
        finish("allowSession")
      end, "pi: accept, and do not ask again in this session")
    end
    for _, lhs in ipairs({ keys.reject, "q" }) do
      util.map(buf, "n", lhs, function()
        finish("deny")
      end, "pi: reject this change")
    end
    vim.api.nvim_create_autocmd("BufWipeout", {
      buffer = buf,
      once = true,
      callback = function()
        vim.schedule(function()
          finish("deny") -- closed without an answer
        end)
      end,
    })
  end
  return { current = current, proposed = proposed, finish = finish }
end

--- Call `on_end(why)` when the turn that asks with `params` ends (agent_end or
--- error; an attachment's question: when it is aborted) or its server stops; returns
--- the function that stops listening.
local function on_turn_end(params, on_end)
  local root = require("pi_lsp.session").root_of(params.uri)
  -- A prompt's attachment is asked for its message, which the server still sends (as a turn
  -- of its own) once allowed when the turn it was queued behind ended meanwhile; unless that
  -- turn was aborted: the server then drops the message and says so (queue_dropped).
  return util.on_turn_end(root, function(note)
    local kind = note.event and note.event.type
    if note.turnId ~= params.turnId then
      return nil
    elseif params.attachment and kind == "queue_dropped" then
      return "the turn was aborted"
    elseif not params.attachment and (kind == "agent_end" or kind == "error") then
      return "the turn ended"
    end
  end, on_end)
end

--- pi/approveTool. Runs in the coroutine nvim gives server requests, so the
--- editor keeps working while the question is open.
function M.approve_tool(params)
  local root = require("pi_lsp.client").root(0)
  local message = M.approval_message(params, root)
  local noted = require("pi_lsp.chat").note_question(params.uri, message)
  local co, is_main = coroutine.running()
  local waits = co and not is_main
  local decision, diff, stop_listening
  local picker = util.picker()
  local function answer(choice, note)
    if decision then
      return -- answered already (or the turn ended first)
    end
    decision = choice
    stop_listening()
    noted(note or ANSWERS[choice])
    if waits then
      -- Resume later: an answer given at once would come before we yield.
      vim.schedule(function()
        coroutine.resume(co, choice)
      end)
    end
  end
  -- Heard from the start: the turn may end before the question opens. Nothing waits for the
  -- answer after that (an abort ends the server's wait), so the diff or picker goes, as in
  -- VS Code.
  stop_listening = on_turn_end(params, function(why)
    answer("deny", "no answer: " .. why)
    if diff then
      diff.finish("deny")
    end
    picker.close()
  end)
  local function ask()
    if decision then
      return
    end
    if params.tool ~= "bash" and params.newText ~= nil then
      diff = M.show_diff(params, message, answer)
      return
    end
    local choices = vim.tbl_filter(function(choice)
      return choice.decision ~= "allowSession" or for_session(params)
    end, CHOICES)
    picker.ask(function()
      vim.ui.select(choices, {
        prompt = message,
        kind = "pi_lsp_approval",
        format_item = function(choice)
          return answer_title(choice.title, choice.decision, params)
        end,
      }, function(choice)
        answer(choice and choice.decision or "deny")
      end)
    end)
  end
  if not waits then
    ask()
    vim.wait(600000, function()
      return decision ~= nil
    end, 50)
    return { decision = decision or "deny" }
  end
  vim.schedule(ask)
  return { decision = coroutine.yield() }
end

-- -- diagnostics --------------------------------------------------------------------------------

--- vim.diagnostic items as LSP diagnostics (the severities count the same way).
function M.lsp_items(diagnostics)
  local items = {}
  for _, d in ipairs(diagnostics) do
    items[#items + 1] = {
      range = {
        start = { line = d.lnum, character = d.col },
        ["end"] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
      },
      severity = d.severity,
      message = d.message,
      source = d.source,
    }
  end
  return items
end

--- pi/diagnostics: what vim.diagnostic knows about the files (loaded buffers;
--- when one is, after a moment for its language servers to see the change).
function M.diagnostics(params)
  local loaded = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      loaded[vim.api.nvim_buf_get_name(buf)] = buf
    end
  end
  local any = vim.iter(params.uris or {}):any(function(uri)
    return loaded[vim.uri_to_fname(uri)] ~= nil
  end)
  local co, is_main = coroutine.running()
  if any and co and not is_main then
    vim.defer_fn(function()
      coroutine.resume(co)
    end, SETTLE_MS)
    coroutine.yield()
  end
  local out = {}
  for _, uri in ipairs(params.uris or {}) do
    local buf = loaded[vim.uri_to_fname(uri)]
    out[#out + 1] = { uri = uri, items = buf and M.lsp_items(vim.diagnostic.get(buf)) or {} }
  end
  return { diagnostics = out }
end

-- -- buffers the server syncs -------------------------------------------------------------------

--- A file buffer of the workspace (not a session file, not a pi view).
local function syncable(buf, root)
  if not vim.api.nvim_buf_is_loaded(buf) or vim.bo[buf].buftype ~= "" then
    return false
  end
  local name = vim.api.nvim_buf_get_name(buf)
  return name ~= "" and not name:match("%.jsonl$") and vim.startswith(name, root .. "/")
end

--- Attach the server to the workspace's file buffers, now and as they open.
function M.sync_buffers(client, root)
  local function attach(buf)
    if syncable(buf, root) and not vim.lsp.buf_is_attached(buf, client.id) then
      vim.lsp.buf_attach_client(buf, client.id)
    end
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    attach(buf)
  end
  local group = vim.api.nvim_create_augroup("pi_lsp_sync_" .. client.id, { clear = true })
  vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile" }, {
    group = group,
    callback = function(ev)
      local current = vim.lsp.get_client_by_id(client.id)
      if not current or (util.has_011 and current:is_stopped()) then
        return true -- the client is gone: drop this autocmd
      end
      attach(ev.buf)
    end,
  })
end

-- -- code sent with a prompt --------------------------------------------------------------------

--- Lines `first`..`last` (1-based) of the current buffer, as the buffer has them.
function M.selection(buf, first, last)
  local lines = vim.api.nvim_buf_get_lines(buf, first - 1, last, false)
  local path = vim.api.nvim_buf_get_name(buf)
  local root = require("pi_lsp.client").root(buf)
  local label = relative(path, root) .. (first == last and (":" .. first) or (":%d-%d"):format(first, last))
  return {
    label = label,
    context = {
      uri = vim.uri_from_bufnr(buf),
      text = table.concat(lines, "\n") .. "\n",
      range = { start = { line = first - 1, character = 0 }, ["end"] = { line = last, character = 0 } },
      languageId = vim.bo[buf].filetype ~= "" and vim.bo[buf].filetype or nil,
    },
  }
end

--- The whole current buffer.
function M.file(buf)
  local item = M.selection(buf, 1, vim.api.nvim_buf_line_count(buf))
  item.label = relative(vim.api.nvim_buf_get_name(buf), require("pi_lsp.client").root(buf))
  item.context.range = nil
  return item
end

local function attach_to_chat(item)
  if vim.api.nvim_buf_get_name(0) == "" or vim.bo.buftype ~= "" then
    return util.error("not a file buffer: nothing to send")
  end
  require("pi_lsp.session").resolve(nil, function(uri)
    require("pi_lsp.chat").attach(uri, item)
  end)
end

--- :PiSend (a range, default the current line)
function M.send_command(first, last)
  attach_to_chat(M.selection(0, first, last))
end

--- :PiAddFile
function M.add_file_command()
  attach_to_chat(M.file(0))
end

return M
