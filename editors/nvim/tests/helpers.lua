-- Shared by the headless test scripts (run by tests/test_nvim.py):
--   nvim --headless --clean -u NONE -l editors/nvim/tests/<script>.lua
-- (one that opens a prompt blocking until answered is dofile'd from -c: under -l the prompt
-- reads stdin, and no event runs meanwhile).
-- Environment: PI_LSP_PYTHON (the venv's python), PI_LSP_WORKSPACE (a copy of
-- examples/workspace), PI_LSP_FAKE_URL (the fake Anthropic server),
-- PI_LSP_APPROVAL ("auto" or "ask"), PI_LSP_RELEASE (the folder of H.release's files),
-- PI_LSP_DUMP (optional: a file to write the rendered buffers to, for the README transcript).
-- A failed check raises, which makes `nvim -l` exit with status 1.
local H = {}

-- The one ceiling of every wait: only a real hang reaches it. Scripts wait for the thing itself
-- (a buffer's text, a server's answer), never for a guessed time: other test suites may be
-- loading this machine's 2 cores, making anything slow by seconds.
H.CEILING_MS = 60000
-- A whole server's start: Python's start and imports took over 60 s at a load average of 15.
H.PROCESS_CEILING_MS = 240000

local here = debug.getinfo(1, "S").source:sub(2)
H.plugin_dir = vim.fn.fnamemodify(here, ":p:h:h")

local function env(name)
  local value = os.getenv(name)
  assert(value and value ~= "", name .. " is not set (run these scripts through tests/test_nvim.py)")
  return value
end

--- Load the plugin from this checkout; answer vim.ui.* from the H.inputs and
--- H.selects queues and record notifications in H.messages.
function H.prepare()
  vim.opt.runtimepath:prepend(H.plugin_dir)
  vim.cmd("runtime plugin/pi_lsp.lua")
  -- Headless nvim has no UI for vim.ui.*: tests answer through these queues.
  H.inputs, H.selects = {}, {}
  vim.ui.input = function(opts, on_confirm)
    H.asked = opts
    local answer = table.remove(H.inputs, 1)
    assert(answer ~= nil, "unexpected vim.ui.input: " .. tostring(opts and opts.prompt))
    on_confirm(answer ~= false and answer or nil)
  end
  vim.ui.select = function(items, opts, on_choice)
    local pick = table.remove(H.selects, 1)
    assert(pick ~= nil, "unexpected vim.ui.select: " .. tostring(opts and opts.prompt))
    local choice = pick(items, opts)
    on_choice(choice, choice and vim.tbl_contains(items, choice) and nil)
  end
  H.messages = {}
  local notify = vim.notify
  vim.notify = function(msg, level, o)
    table.insert(H.messages, msg)
    if level and level >= vim.log.levels.ERROR then
      io.stderr:write("notify(error): " .. msg .. "\n")
    end
    return notify(msg, level, o)
  end
end

--- setup() options that run this checkout's server against the fake Anthropic.
function H.options(extra)
  return vim.tbl_deep_extend("force", {
    cmd = { env("PI_LSP_PYTHON"), "-P", "-m", "pi_lsp.cli", "serve" },
    settings = {
      anthropicBaseUrl = env("PI_LSP_FAKE_URL"),
      anthropicApiKey = "test",
      toolApproval = os.getenv("PI_LSP_APPROVAL") or "auto",
    },
  }, extra or {})
end

--- Load the plugin and start it on the test workspace.
function H.setup(extra)
  H.prepare()
  vim.cmd.cd(env("PI_LSP_WORKSPACE"))
  require("pi_lsp").setup(H.options(extra))
  local client = require("pi_lsp").client()
  H.wait(function()
    return client.initialized
  end, "the server did not initialize", nil, H.PROCESS_CEILING_MS)
  return client
end

--- Whether a notification `text` was shown.
function H.said(text)
  return vim.tbl_contains(H.messages, "pi-lsp: " .. text)
end

--- Wait until a notification matches the Lua `pattern` (`plain`: found as it is).
function H.wait_said(pattern, plain, why)
  H.wait(function()
    for _, m in ipairs(H.messages) do
      if m:find(pattern, 1, plain) then
        return true
      end
    end
    return false
  end, why)
end

function H.lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

function H.text(buf)
  return table.concat(H.lines(buf), "\n")
end

--- Wait for `cond()` (up to `ceiling_ms`, default H.CEILING_MS); on a timeout fail naming
--- `what`, with the text of `buf` (a buffer, or a function giving the one found last) and the
--- messages so far.
function H.wait(cond, what, buf, ceiling_ms)
  if vim.wait(ceiling_ms or H.CEILING_MS, cond, 20) then
    return
  end
  if type(buf) == "function" then
    buf = buf()
  end
  local detail = ""
  if buf and vim.api.nvim_buf_is_valid(buf) then
    detail = "\n--- buffer " .. vim.api.nvim_buf_get_name(buf) .. " ---\n" .. H.text(buf)
  end
  if #H.messages > 0 then
    detail = detail .. "\n--- messages ---\n" .. table.concat(H.messages, "\n")
  end
  error("timed out: " .. what .. detail, 0)
end

function H.check(cond, what, buf)
  if not cond then
    local detail = buf and ("\n--- buffer ---\n" .. H.text(buf)) or ""
    error("check failed: " .. what .. detail, 0)
  end
end

function H.contains(buf, needle)
  return H.text(buf):find(needle, 1, true) ~= nil
end

--- The buffer whose name starts with `prefix` (pi://tree/, pi://chat/ …).
--- The buffer named `prefix`…, once it holds `text`.
function H.wait_buf(prefix, text, what)
  local buf
  H.wait(function()
    buf = H.find_buf(prefix)
    return buf and H.contains(buf, text)
  end, what, function()
    return buf
  end)
  return buf
end

-- Another program cuts the session file short, as a running turn meets it (its last line goes);
-- the file's name.
function H.cut_last_line(uri)
  local file = vim.uri_to_fname(uri)
  local lines = vim.fn.readfile(file, "b")
  table.remove(lines)
  vim.fn.writefile(lines, file, "b")
  return file
end

function H.find_buf(prefix)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.startswith(vim.api.nvim_buf_get_name(buf), prefix) then
      return buf
    end
  end
  return nil
end

--- The line number of the first line containing `needle`.
function H.line_of(buf, needle)
  for lnum, line in ipairs(H.lines(buf)) do
    if line:find(needle, 1, true) then
      return lnum
    end
  end
  return nil
end

--- The line of tree entry `id` (not the header, which names the leaf too).
function H.entry(buf, id)
  for lnum, line in ipairs(H.lines(buf)) do
    if line:find(" " .. id .. " [%w_]+: ") then
      return lnum
    end
  end
  return nil
end

--- Press keys as a user would (mappings apply).
function H.keys(keys)
  vim.api.nvim_feedkeys(vim.keycode(keys), "mx", false)
end

--- A server command, synchronously, for checks on the server's state.
--- Hold vim.ui.select's question for the test to answer later, as a person reading it would;
--- the returned table gets `items` and `on_choice` when asked.
function H.held_select()
  local held = {}
  vim.ui.select = function(items, _, on_choice)
    held.items, held.on_choice = items, on_choice
  end
  return held
end

--- Open the chat and send `text` from its input; the chat and input buffers and the session's
--- uri.
function H.chat_send(text)
  vim.cmd("PiChat")
  local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
  local input_buf = H.find_buf("pi://input/")
  local uri = require("pi_lsp.session").last_uri
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { text })
  H.keys("<CR>")
  return chat_buf, input_buf, uri
end

--- Open the chat, send "start" from its input and wait until the reply streams (the fake
--- server's slow reply); the chat and input buffers and the session's uri.
function H.chat_streaming()
  local chat_buf, input_buf, uri = H.chat_send("start")
  H.wait(function()
    return H.contains(chat_buf, "word3")
  end, "the turn did not stream", chat_buf)
  return chat_buf, input_buf, uri
end

--- Count the bytes read through io.open's files from now on, in the returned table's `bytes`;
--- its `stop()` puts io.open back.
function H.count_reads()
  local open = io.open
  local counted = {
    bytes = 0,
    stop = function()
      io.open = open
    end,
  }
  io.open = function(...)
    local file = open(...)
    return file
      and setmetatable({}, {
        __index = function(_, name)
          return function(_, ...)
            local results = { file[name](file, ...) }
            if name == "read" and type(results[1]) == "string" then
              counted.bytes = counted.bytes + #results[1]
            end
            return unpack(results, 1, table.maxn(results))
          end
        end,
      })
  end
  return counted
end

--- With toolApproval = "ask": send the steer "STEER-X" from a streaming chat with a line of
--- OUTSIDE_FILE attached, so that its file is asked about; then wipe the chat (:bwipeout), open
--- it again (:PiChat) and type "MY-DRAFT" in its input. Returns the held question (`held`), the
--- wiped chat (`old`), the reopened one (`chat`, `chat_buf`, `input_buf`), the session's `uri`
--- and `steers_answered()`, the pi.prompt answers to steers the chats have read so far.
function H.steer_asked_then_chat_reopened()
  local chats = require("pi_lsp.chat")
  local client = require("pi_lsp.client")
  local held = H.held_select()
  local answered = 0
  local exec = client.exec
  client.exec = function(method, args, callback, root)
    return exec(method, args, function(err, result)
      callback(err, result)
      if method == "pi.prompt" and args.delivery == "steer" then
        answered = answered + 1
      end
    end, root)
  end

  local chat_buf, input_buf, uri = H.chat_streaming()
  local old = chats.get(uri)
  vim.cmd("wincmd t | edit " .. vim.fn.fnameescape(env("OUTSIDE_FILE")) .. " | 1PiSend")
  H.wait(function()
    return #old.context == 1
  end, "the line was not attached", chat_buf)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "STEER-X" })
  H.keys("S")
  H.wait(function()
    return held.on_choice ~= nil
  end, "no approval question", chat_buf)

  -- The chat goes and is opened again while the question is open; the user types a draft.
  vim.cmd("bwipeout! " .. input_buf .. " " .. chat_buf)
  vim.cmd("PiChat")
  chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not open again")
  input_buf = H.find_buf("pi://input/")
  local chat = chats.get(uri)
  H.check(chat and chat ~= old and chat.busy, "a new chat, on the running turn")
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "MY-DRAFT" })
  return {
    held = held,
    old = old,
    chat = chat,
    chat_buf = chat_buf,
    input_buf = input_buf,
    uri = uri,
    steers_answered = function()
      return answered
    end,
  }
end

--- Let the fake's reply held until the file `name` exists go on (tests/test_nvim.py's
--- held_reply): what the spec did before this happened while the turn ran, at any pace.
function H.release(name)
  assert(io.open(env("PI_LSP_RELEASE") .. "/" .. name, "w")):close()
end

function H.exec(command, args)
  local client = require("pi_lsp").client()
  local response = client:request_sync("workspace/executeCommand", {
    command = command,
    arguments = { args or vim.empty_dict() },
  }, H.CEILING_MS)
  assert(response and not response.err, command .. " failed: " .. vim.inspect(response))
  return response.result
end

--- Append a buffer's text to PI_LSP_DUMP (used to write the README transcript).
--- The lines as the buffer's window shows them: a closed fold is its fold text.
function H.visible(buf)
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    return H.lines(buf)
  end
  return vim.api.nvim_win_call(win, function()
    local out, lnum, count = {}, 1, vim.api.nvim_buf_line_count(buf)
    while lnum <= count do
      if vim.fn.foldclosed(lnum) == lnum then
        out[#out + 1] = vim.fn.foldtextresult(lnum)
        lnum = vim.fn.foldclosedend(lnum) + 1
      else
        out[#out + 1] = vim.fn.getline(lnum)
        lnum = lnum + 1
      end
    end
    return out
  end)
end

--- Line `lnum` of `buf` as a window with conceallevel=2 shows it, off the cursor: each
--- capture of the treesitter highlights that sets `conceal` hides its range or shows its text
--- instead, as vim.treesitter.highlighter does (the screen wraps rows by the raw line).
function H.shown(buf, lnum)
  local row, line = lnum - 1, vim.api.nvim_buf_get_lines(buf, lnum - 1, lnum, false)[1]
  local parser = vim.treesitter.get_parser(buf)
  parser:parse(true)
  local instead = {} -- byte (1-based) -> what shows in its place
  parser:for_each_tree(function(tree, language)
    local query = vim.treesitter.query.get(language:lang(), "highlights")
    for id, node, metadata in (query and query:iter_captures(tree:root(), buf, row, row + 1) or function() end) do
      local conceal = metadata.conceal or metadata[id] and metadata[id].conceal
      local range = vim.treesitter.get_range(node, buf, metadata[id]) -- rows, columns and bytes
      local from_row, from, to_row, to = range[1], range[2], range[4], range[5]
      if conceal and from_row == row then
        to = to_row == row and to or #line
        for byte = from + 1, to do
          instead[byte] = byte == from + 1 and conceal or ""
        end
      end
    end
  end)
  local shown = {}
  for byte = 1, #line do
    shown[#shown + 1] = instead[byte] or line:sub(byte, byte)
  end
  return table.concat(shown)
end

--- `last`: only the last N lines (with a marker for what was left out).
function H.dump(title, buf, last)
  local path = os.getenv("PI_LSP_DUMP")
  if not path or path == "" then
    return
  end
  local lines = H.visible(buf)
  if last and #lines > last then
    lines = vim.list_extend({ ("[… %d lines above]"):format(#lines - last) }, lines, #lines - last + 1)
  end
  local file = assert(io.open(path, "a"))
  file:write(("$ %s\n"):format(title))
  file:write(table.concat(lines, "\n") .. "\n\n")
  file:close()
end

function H.finish()
  require("pi_lsp.client").stop_all()
  vim.wait(3000, function()
    return #vim.lsp.get_clients({ name = "pi_lsp" }) == 0
  end, 50)
  io.stdout:write("ok\n")
end

return H
