-- :PiContext, the context diff of the tree view, and :PiCompact. The server
-- writes the Markdown (with token counts); these only put it in buffers.
local client = require("pi_lsp.client")
local config = require("pi_lsp.config")
local render = require("pi_lsp.render")
local session = require("pi_lsp.session")
local util = require("pi_lsp.util")

local M = {}

local function name_of(uri)
  return vim.fn.fnamemodify(util.key(uri), ":t:r")
end

local function show_scratch(name, lines, uri, filetype)
  local buf = util.scratch(name, filetype or "markdown")
  vim.b[buf].pi_lsp_uri = uri
  vim.b[buf].pi_lsp_root = session.root_of(uri)
  util.set_lines(buf, 0, -1, lines)
  util.map(buf, "n", "q", function()
    util.close_window()
  end, "close")
  local win = util.show(buf, "botright split")
  util.set_local(win, { wrap = true })
  util.markdown_window(win)
  return buf, win
end

-- -- editing the context ------------------------------------------------------------------------

local EDITABLE = { user = true, assistant = true, toolResult = true, custom = true }
local PREFILL_CHARS = 2000 -- a longer message (a huge output) is replaced starting empty

--- The last of `headings` (pi.previewContext's, 0-based lines) at or above `line` (1-based).
local function heading_above(headings, line)
  local found
  for _, heading in ipairs(headings) do
    if heading.line < line then
      found = heading
    end
  end
  return found
end

--- The message whose heading is at or above `line`: its entry id and "kept", "replaced" or
--- "removed"; nil when it cannot be edited. The server says where each heading is: an id read
--- back from the text could be another.
function M.heading_at(headings, line)
  local found = heading_above(headings, line)
  if found and type(found.entryId) == "string" and EDITABLE[found.role] then
    return found.entryId, found.state
  end
end

local function replace(uri, entry_id, done)
  local root = session.root_of(uri)
  client.run("pi.previewContext", { uri = uri, page = 1, entryId = entry_id }, function(result)
    local page = (result.pages or {})[1] or {}
    local item = (page.messages or {})[1] or {}
    local current = render.content_text((item.message or {}).content)
    -- Not one line, or holding NUL (vim.fn.input takes it for a Blob): start empty.
    local default = (#current <= PREFILL_CHARS and not current:find("[%z\n]")) and current or ""
    -- One line: vim.ui.input hands the prompt to vim.fn.input, which takes NUL for a Blob.
    local prompt = ("What the model sees instead of %s: "):format(util.one_line(entry_id))
    vim.ui.input({ prompt = prompt, default = default }, function(text)
      if text ~= nil then
        client.run("pi.editContext", { uri = uri, targetId = entry_id, replacement = { content = text } }, done, root)
      end
    end)
  end, root)
end

--- Edit the context of `uri` at its current leaf: "remove" the message of
--- `entry_id`, "replace" its content (asked for), or "undo" the edit in force.
--- `done` runs once the server has written the edit.
function M.edit(uri, entry_id, action, done)
  local function written(result)
    local said = { remove = "removed %s from the context", replace = "replaced %s in the context", undo = "undid the context edit of %s" }
    util.notify(said[action]:format(util.one_line(entry_id)))
    if done then
      done(result)
    end
  end
  if action == "replace" then
    return replace(uri, entry_id, written)
  end
  local command = action == "undo" and "pi.undoContextEdit" or "pi.editContext"
  local args = { uri = uri, targetId = entry_id }
  if action == "remove" then
    args.replacement = vim.NIL
  end
  client.run(command, args, written, session.root_of(uri))
end

--- The keys of the context edits, for the `?` help of the context buffer and the chat.
function M.edit_help()
  local keys = config.options.context.keys
  return ("%s remove from the context · %s replace in the context · %s undo the context edit"):format(keys.remove, keys.replace, keys.undo)
end

--- Map the edit keys in `buf`; `target()` names the entry under the cursor (or nil). They edit
--- the session the buffer names when pressed: it may have moved to a new file since.
function M.map_edit_keys(buf, target, after)
  local keys = config.options.context.keys
  for _, action in ipairs({ "remove", "replace", "undo" }) do
    util.map(buf, "n", keys[action], function()
      local id = target()
      if not id then
        return util.warn("no user, assistant, tool result or custom message under the cursor")
      end
      M.edit(vim.b[buf].pi_lsp_uri, id, action, after)
    end, "pi: " .. action .. " in the context")
  end
end

local PAGE = 50 -- messages from each end of a long context; `+` shows as many more

--- The line (1-based) of a paged preview's "_… messages A to B not shown_" and how many headings
--- stand above it; nil when every message is shown. The server writes the first page's messages
--- (each after those an edit removed before it), that line, a blank line, the last page's heading.
local function gap_of(result)
  local pages = result.pages or {}
  if #pages < 2 then
    return nil
  end
  local above = #pages[1].messages
  for _, edit in ipairs(result.edits or {}) do
    if edit.kind == "omitted" and edit.position < #pages[1].messages then
      above = above + 1
    end
  end
  local below = (result.headings or {})[above + 1]
  return below and { line = below.line - 1, above = above }
end

--- Where line `row` of the preview `result` is, in terms that outlast showing more of it: at the
--- messages left out, or in a message (its entry, which of that entry's messages, the line in it).
local function anchor_of(result, row)
  local gap = gap_of(result)
  if gap and (row == gap.line or row == gap.line - 1) then
    return { gap = gap.above }
  end
  local headings = result.headings or {}
  local found = heading_above(headings, row)
  -- Above the first message (the header) nothing moves; nor does a message of no entry.
  if not found or type(found.entryId) ~= "string" then
    return { row = row }
  end
  local nth = 0
  for _, heading in ipairs(headings) do
    nth = heading.entryId == found.entryId and nth + 1 or nth
    if heading == found then
      break
    end
  end
  return { row = row, id = found.entryId, nth = nth, offset = row - found.line - 1 }
end

--- The line `anchor` (from anchor_of) is at in the preview `result`.
local function row_of(result, anchor)
  local headings = result.headings or {}
  if anchor.gap then
    local gap = gap_of(result)
    -- Every message shown now: the first of those that were not.
    local first = headings[anchor.gap + 1]
    return gap and gap.line or (first and first.line + 1) or 1
  end
  local nth = 0
  for _, heading in ipairs(headings) do
    if anchor.id and heading.entryId == anchor.id then
      nth = nth + 1
      if nth == anchor.nth then
        return heading.line + 1 + anchor.offset
      end
    end
  end
  return anchor.row
end

--- The context preview of `uri` at `leaf_id` (default: the current leaf): the
--- first and last `page` messages (default PAGE); `place(result)`: the line to put the
--- cursor on (default: the top).
function M.preview(uri, leaf_id, page, place)
  local args = { uri = uri, page = page or PAGE }
  if leaf_id and leaf_id ~= "" then
    args.leafId = leaf_id
  end
  client.run("pi.previewContext", args, function(result)
    -- One buffer per session: previewing another entry replaces the last one.
    local lines = util.split_lines(result.markdown or "")
    local buf, win = show_scratch("pi://context/" .. name_of(uri), lines, uri)
    vim.b[buf].pi_lsp_leaf = result.leafId
    util.map(buf, "n", "+", function()
      -- The cursor stays on the text it is on: the messages shown are where they were, or more.
      local anchor = anchor_of(result, vim.api.nvim_win_get_cursor(0)[1])
      M.preview(vim.b[buf].pi_lsp_uri, leaf_id, args.page + PAGE, function(more)
        return row_of(more, anchor)
      end)
    end, "show more of the context")
    local line = place and place(result) or 1
    vim.api.nvim_win_set_cursor(win, { math.max(1, math.min(line, #lines)), 0 })
    -- Edits are written at the current leaf: the buffer then shows that.
    local headings = result.headings or {}
    M.map_edit_keys(buf, function()
      return M.heading_at(headings, vim.api.nvim_win_get_cursor(0)[1])
    end, function()
      local line_now = vim.api.nvim_win_get_cursor(0)[1]
      M.preview(vim.b[buf].pi_lsp_uri, nil, args.page, function()
        return line_now
      end)
    end)
    util.map(buf, "n", config.options.context.keys.help, function()
      util.notify(M.edit_help() .. " · + more of the context · q close")
    end, "pi: keys")
  end, session.root_of(uri))
end

function M.command(arg)
  session.resolve(nil, function(uri)
    M.preview(uri, arg)
  end)
end

--- An id, a path or a preview as written (render.literal): no Markdown.
local function literal(text)
  return render.literal(text, "")
end

local function entry_line(id, by_id)
  local node = by_id and by_id[id]
  if not node then
    return "- " .. literal(id)
  end
  local preview = literal(node.preview or "")
  return ("- %s %s: %s"):format(literal(id), util.one_line(node.role or node.type), preview)
end

--- What is in the context at `from` and not at `to`, and the other way round.
function M.diff(uri, from, to, by_id)
  if not to then
    return util.warn("the session has no leaf to compare with")
  end
  client.run("pi.diffContext", { uri = uri, fromLeafId = from, toLeafId = to }, function(result)
    local lines = {
      ("# Context at %s against the leaf %s"):format(literal(from), literal(to)),
      "",
      ("%s tokens at %s · %s tokens at the leaf (%+d)"):format(
        util.thousands(result.fromTokens),
        literal(from),
        util.thousands(result.toTokens),
        (result.toTokens or 0) - (result.fromTokens or 0)
      ),
      "",
      ("## Only at %s (%d)"):format(literal(from), #(result.onlyFrom or {})),
      "",
    }
    for _, id in ipairs(result.onlyFrom or {}) do
      lines[#lines + 1] = entry_line(id, by_id)
    end
    vim.list_extend(lines, { "", ("## Only at the leaf %s (%d)"):format(literal(to), #(result.onlyTo or {})), "" })
    for _, id in ipairs(result.onlyTo or {}) do
      lines[#lines + 1] = entry_line(id, by_id)
    end
    -- Ids and previews (a session's name) are session text, which may hold line breaks.
    show_scratch("pi://diff/" .. name_of(uri), vim.tbl_map(util.one_line, lines), uri)
  end, session.root_of(uri))
end

-- -- compaction --------------------------------------------------------------------------------

function M.plan_lines(plan)
  local lines = {
    "# Compaction plan",
    "",
    ("- tokens before: %s"):format(util.thousands(plan.tokensBefore)),
    ("- messages to summarize: %d%s"):format(
      plan.messagesToSummarize or 0,
      (plan.turnPrefixMessages or 0) > 0 and (" (+%d of a split turn)"):format(plan.turnPrefixMessages) or ""
    ),
    "- first kept entry: " .. literal(plan.firstKeptEntryId or "?"),
  }
  if plan.readFiles and #plan.readFiles > 0 then
    lines[#lines + 1] = "- read files: " .. table.concat(vim.tbl_map(literal, plan.readFiles), ", ")
  end
  if plan.modifiedFiles and #plan.modifiedFiles > 0 then
    lines[#lines + 1] = "- modified files: " .. table.concat(vim.tbl_map(literal, plan.modifiedFiles), ", ")
  end
  -- The kept entry's id and the paths are session text, which may hold line breaks.
  lines = vim.tbl_map(util.one_line, lines)
  if plan.previousSummary then
    vim.list_extend(lines, { "", "## Previous summary (updated, not replaced)", "" })
    vim.list_extend(lines, util.split_lines(plan.previousSummary))
  end
  return lines
end

local function run_compaction(uri, instructions)
  local args = { uri = uri }
  if instructions and vim.trim(instructions) ~= "" then
    args.instructions = instructions
  end
  client.run("pi.compact", args, function(result)
    util.notify("compacting…")
    session.on_job(result.jobId, function(done)
      if done.ok then
        local before = done.result and done.result.tokensBefore
        util.notify("compacted" .. (before and (" (" .. util.thousands(before) .. " tokens before)") or ""))
      else
        util.error("compaction failed: " .. tostring(done.error))
      end
    end)
  end, session.root_of(uri))
end

--- Show the plan (a dry run), ask, then compact in the background.
function M.compact(uri)
  client.run("pi.compact", { uri = uri, dryRun = true }, function(result)
    if result.plan == nil or result.plan == vim.NIL then
      return util.notify(result.reason) -- the server's own words for the refusal
    end
    show_scratch("pi://compact/" .. name_of(uri), M.plan_lines(result.plan), uri)
    local choices = { "Compact", "Compact with instructions…", "Cancel" }
    vim.ui.select(choices, { prompt = "Compact this branch?" }, function(choice)
      if choice == choices[1] then
        run_compaction(uri)
      elseif choice == choices[2] then
        vim.ui.input({ prompt = "Instructions for the summary: " }, function(text)
          if text ~= nil then
            run_compaction(uri, text)
          end
        end)
      end
    end)
  end, session.root_of(uri))
end

function M.compact_command(arg)
  session.resolve(arg, M.compact)
end

return M
