-- Pure rendering of pi messages (the agent layer, as pi.previewContext and
-- pi/turn events carry them) into Markdown lines plus fold ranges.
-- Thinking, tool calls, tool results and summaries get a fold each: the
-- conversation reads as prose, the details are one `zo` away.
local util = require("pi_lsp.util")

local M = {}

local Builder = {}
Builder.__index = Builder

function M.builder()
  -- entries: where each message with an entry id starts ({ line, id, role, removed }).
  return setmetatable({ lines = {}, folds = {}, entries = {} }, Builder)
end

--- Add text (may hold newlines).
function Builder:add(text)
  for _, line in ipairs(util.split_lines(text)) do
    self.lines[#self.lines + 1] = line
  end
end

function Builder:blank()
  if #self.lines > 0 and self.lines[#self.lines] ~= "" then
    self.lines[#self.lines + 1] = ""
  end
end

--- A folded block: `summary` stays visible, `body()` adds the folded lines.
function Builder:folded(summary, body)
  local first = #self.lines + 1
  self:add(summary)
  body()
  self.folds[#self.folds + 1] = { first, #self.lines }
end

--- A fenced block whose fence is longer than any run of backticks inside.
function Builder:fenced(text, info)
  text = (text or ""):gsub("\n+$", "") -- tool output ends in a newline; the fence does that
  local fence = "```"
  while (text or ""):find(fence, 1, true) do
    fence = fence .. "`"
  end
  self:add(fence .. (info or ""))
  self:add(text or "")
  self:add(fence)
end

--- Append another builder's output (its folds shifted to fit), a blank line
--- between them as between any two messages.
function Builder:extend(other)
  if #other.lines > 0 and other.lines[1] ~= "" then
    self:blank()
  end
  local offset = #self.lines
  vim.list_extend(self.lines, other.lines)
  for _, fold in ipairs(other.folds) do
    self.folds[#self.folds + 1] = { fold[1] + offset, fold[2] + offset }
  end
  for _, entry in ipairs(other.entries) do
    self.entries[#self.entries + 1] = vim.tbl_extend("force", entry, { line = entry.line + offset })
  end
end

--- A message content's text blocks joined; `image` (if given) stands in for each image.
local function content_text(content, image)
  if type(content) == "string" then
    return content
  end
  local parts = {}
  for _, block in ipairs(content or {}) do
    if block.type == "text" then
      parts[#parts + 1] = block.text or ""
    elseif block.type == "image" and image then
      parts[#parts + 1] = image
    end
  end
  return table.concat(parts, "\n")
end
M.content_text = content_text

-- Where a failed reply's preview is cut, as the server cuts it (pi_lsp/context/edits.py).
local FAILURE_CHARS = 8000

--- `text` on one line of at most `limit` characters. Control characters go first: vim.fn takes
--- a string holding NUL for a Blob (E976), and tool output may hold any byte.
local function one_line(text, limit)
  local flat = util.one_line(text or ""):gsub("%s+", " ")
  flat = vim.trim(flat)
  limit = limit or 60
  if vim.fn.strchars(flat) > limit then
    flat = vim.fn.strcharpart(flat, 0, limit - 1) .. "…"
  end
  return flat
end

--- Markdown that shows `text` on one line as written, between `mark`s ("_", "**"): a code span,
--- whose backticks (more than any run inside) markdown_inline conceals and inside which nothing is
--- markup. An error is copied into bug reports: its `*`, `_`, `[…]` and links must not vanish.
--- Not at a line's start: three backticks there open a fenced block.
function M.literal(text, mark)
  local flat = util.one_line(text)
  if flat == "" then
    return "" -- (two backticks alone are no code span)
  end
  local longest = 0
  for run in flat:gmatch("`+") do
    longest = math.max(longest, #run)
  end
  local ticks = ("`"):rep(longest + 1)
  -- A backtick at an end would lengthen the delimiter: a space keeps them apart (and shows).
  local before = flat:find("^`") and " " or ""
  local after = flat:find("`$") and " " or ""
  return mark .. ticks .. before .. flat .. after .. ticks .. mark
end

--- The suffix of a message's heading: its entry id (one line, as every name a session wrote).
local function where(entry_id, edited)
  return (edited and " · ✎ edited in context" or "") .. (entry_id and ("  " .. M.literal(entry_id, "")) or "")
end

local function call_target(arguments)
  if type(arguments) ~= "table" then
    return ""
  end
  return one_line(tostring(arguments.path or arguments.command or ""), 40)
end

-- Where the server's previews cut a call's path or command (pi_lsp/session/outline.py).
local CALL_TARGET_CHARS = 32

--- Whether the server's previews read `value` as there: Python's truth, "" and 0 are not.
local function given(value)
  return value ~= nil and value ~= vim.NIL and value ~= false and value ~= "" and value ~= 0
end

local function encode(value)
  if type(value) == "string" then
    return value -- a partial argument string while streaming
  end
  local ok, text = pcall(vim.json.encode, value)
  return ok and text or vim.inspect(value)
end

function Builder:assistant_block(block)
  if block.type == "text" then
    self:blank()
    self:add(block.text or "")
  elseif block.type == "thinking" then
    if (block.thinking or "") == "" then
      return
    end
    self:blank()
    local count = #util.split_lines(block.thinking)
    self:folded(("> ▸ _thinking_ (%d line%s)"):format(count, count == 1 and "" or "s"), function()
      for _, line in ipairs(util.split_lines(block.thinking)) do
        self:add("> " .. line)
      end
    end)
  elseif block.type == "toolCall" then
    self:blank()
    -- A call's name and path or command are no Markdown: `rm *.log x*` keeps its `*`s.
    local call = ("→ %s(%s)"):format(block.name or "?", call_target(block.arguments))
    self:folded("▸ " .. M.literal(call, "**"), function()
      self:fenced(encode(block.arguments), "json")
    end)
  end
end

function Builder:tool_result(message, entry_id, edited)
  local text = content_text(message.content, "[image]")
  local mark = util.truthy(message.isError) and "✗" or "✓"
  self:blank()
  -- (Neovim's LSP client reads a JSON null as a missing field: both read "undefined".)
  local name = util.one_line(util.js_string(message.toolName))
  -- A tool's output and name are no Markdown: a failed call's error shows as written.
  local line = "▸ " .. M.literal(("%s %s: %s"):format(mark, name, one_line(text)), "")
  self:folded(line .. where(entry_id, edited), function()
    self:fenced(text)
  end)
end

--- Code sent with a prompt reaches the model as `<file path=… lines=…>`
--- markup (one text block each); the user sees a titled code block, folded.
--- Returns nil for any other text.
function M.attached_file(text)
  local attrs, body = text:match('^<file (path="[^"]*"[^>\n]*)>\n(.*)</file>$')
  local path = attrs and attrs:match('^path="([^"]*)"')
  if not path then
    return nil
  end
  local first, last = attrs:match(' lines="(%d+)%-(%d+)"')
  local lines = not first and "" or first == last and (":" .. first) or (":" .. first .. "-" .. last)
  return { title = path .. lines, language = attrs:match(' language="([^"]*)"'), text = body:gsub("\n$", "") }
end

function Builder:user_content(content)
  if type(content) == "string" then
    return self:add(content)
  end
  local text = {} -- consecutive text blocks, as one paragraph
  local function flush()
    if #text > 0 then
      self:add(table.concat(text, "\n"))
      text = {}
    end
  end
  for _, block in ipairs(content or {}) do
    local file = block.type == "text" and M.attached_file(block.text or "")
    if file then
      flush()
      self:blank()
      local count = #util.split_lines(file.text)
      self:folded(("▸ 📎 %s (%d line%s)"):format(file.title, count, count == 1 and "" or "s"), function()
        self:fenced(file.text, file.language)
      end)
    elseif block.type == "text" then
      text[#text + 1] = block.text or ""
    elseif block.type == "image" then
      text[#text + 1] = "[image]"
    end
  end
  flush()
end

--- One message of the conversation. `entry_id` names its entry when known;
--- `edited`: a context edit replaced its content.
function Builder:message(message, entry_id, edited)
  local role = message.role
  if entry_id then
    self:blank()
    self.entries[#self.entries + 1] = { line = #self.lines + 1, id = entry_id, role = role }
  end
  if role == "user" then
    self:blank()
    self:add("## You" .. where(entry_id, edited))
    self:add("")
    self:user_content(message.content)
  elseif role == "assistant" then
    self:blank()
    local model = message.model and (" · " .. M.literal(message.model, "")) or ""
    self:add("## pi" .. model .. where(entry_id, edited))
    for _, block in ipairs(message.content or {}) do
      self:assistant_block(block)
    end
    if message.stopReason == "error" or message.stopReason == "aborted" then
      self:blank()
      local reason = message.errorMessage and (": " .. util.one_line(message.errorMessage)) or ""
      self:add(M.literal(("(%s%s)"):format(message.stopReason, reason), "_"))
    end
  elseif role == "toolResult" then
    self:tool_result(message, entry_id, edited)
  elseif role == "bashExecution" then
    self:blank()
    self:folded("## $ " .. one_line(message.command) .. where(entry_id), function()
      self:fenced(("$ %s\n%s"):format(message.command or "", message.output or ""), "sh")
    end)
  elseif role == "compactionSummary" then
    self:blank()
    local before = message.tokensBefore and (" (" .. util.thousands(message.tokensBefore) .. " tokens before)") or ""
    self:folded("## ▸ Compacted history" .. before .. where(entry_id), function()
      self:add("")
      self:add(message.summary or "")
    end)
  elseif role == "branchSummary" then
    self:blank()
    self:folded("## ▸ Summary of a branch that was left" .. where(entry_id), function()
      self:add("")
      self:add(message.summary or "")
    end)
  elseif role == "custom" then
    self:blank()
    self:add("## " .. M.literal(message.customType or "custom", "") .. where(entry_id, edited))
    self:add("")
    self:add(content_text(message.content, "[image]"))
  end
end

--- A message a context edit left out (pi.previewContext's `edits`), in its place. A mark
--- without `targetId` and `tokensBefore` is one a running turn left out (a failed attempt).
function Builder:removed(mark)
  self:blank()
  if mark.targetId then
    self.entries[#self.entries + 1] = { line = #self.lines + 1, id = mark.targetId, role = mark.role, removed = true }
  end
  local role = util.one_line(mark.role)
  local tokens = mark.tokensBefore and (" · %s tokens"):format(util.thousands(mark.tokensBefore)) or ""
  self:add(("## ~~%s~~ removed from the context%s%s"):format(role, tokens, where(mark.targetId)))
  self:add("")
  -- A failed reply's error is why it failed: shown whole, not as a line's preview.
  if mark.failure then
    self:add(M.literal(one_line(mark.failure, FAILURE_CHARS), "_"))
  else
    self:add(M.literal(one_line(mark.original or ""), "_"))
  end
end

--- A failed reply the turn left out of the context to ask again, as the server's edit marks
--- it once the turn is over (pi_lsp/context/edits.py failure_preview).
function M.attempt_mark(message)
  local text = {}
  for _, block in ipairs(message.content or {}) do
    if block.type == "text" then
      text[#text + 1] = block.text or ""
    end
  end
  local calls = {}
  for _, block in ipairs(message.content or {}) do
    if block.type == "toolCall" then
      local arguments = type(block.arguments) == "table" and block.arguments or {}
      local target = given(arguments.path) and arguments.path or given(arguments.command) and arguments.command or ""
      calls[#calls + 1] = ("%s(%s)"):format(block.name or "?", one_line(tostring(target), CALL_TARGET_CHARS))
    end
  end
  local reason = given(message.errorMessage) and message.errorMessage or table.concat(text, " ")
  local original = ("[%s] %s"):format(message.stopReason, reason)
  if #calls > 0 then
    original = original .. " → " .. table.concat(calls, ", ")
  end
  return { role = "assistant", failure = original }
end

--- The characters of `b`'s lines, newlines included: what treesitter parses.
local function size_of(b)
  local size = 0
  for _, line in ipairs(b.lines) do
    size = size + #line + 1
  end
  return size
end

--- The position of the oldest message that `budget` characters show whole, counting from the
--- newest (0 without a budget), and whether it is cut instead: the newest alone is larger.
local function first_within(result, budget)
  if not budget then
    return 0, false
  end
  local first, left = nil, budget
  local pages = result.pages or {}
  for p = #pages, 1, -1 do
    local page = pages[p]
    for i = #(page.messages or {}), 1, -1 do
      local item = page.messages[i]
      local b = M.builder()
      b:message(item.message or {}, item.entryId, item.edited)
      left = left - size_of(b)
      if left < 0 then
        return first or (page.start + i - 1), first == nil
      end
      first = page.start + i - 1
    end
  end
  return 0, false
end

--- The start of `line` in at most `bytes` bytes, not splitting a character.
local function line_start(line, bytes)
  if bytes >= #line then
    return line
  end
  return line:sub(1, bytes + vim.str_utf_start(line, bytes + 1))
end

--- The first lines of a built message up to `budget` characters, the line that passes it cut
--- there (one huge line, a minified file say, showed nothing), a fence left open there closed
--- (it would swallow every later line), then a line saying what was cut.
local function cut(b, budget, more)
  local kept, size, fence = {}, 0, nil
  for _, line in ipairs(b.lines) do
    size = size + #line + 1
    if size > budget then
      local room = budget - (size - #line - 1)
      if room > 0 then
        kept[#kept + 1] = line_start(line, room)
      end
      break
    end
    kept[#kept + 1] = line
    local run = line:match("^%s*(```+)") or line:match("^%s*(~~~+)")
    if run and not fence then
      fence = run
    elseif run and fence and run:sub(1, 1) == fence:sub(1, 1) and #run >= #fence and line:match("^%s*[`~]+%s*$") then
      fence = nil
    end
  end
  local out = M.builder()
  out.lines = kept
  for _, fold in ipairs(b.folds) do
    if fold[1] < #kept then
      out.folds[#out.folds + 1] = { fold[1], math.min(fold[2], #kept) }
    end
  end
  out.entries = vim.tbl_filter(function(entry)
    return entry.line <= #kept
  end, b.entries)
  if fence then
    out:add(fence)
  end
  out:blank()
  out:add(("_… %s more characters of this message not shown (%s shows more)_"):format(util.thousands(size_of(b) - size_of(out)), more))
  return out
end

--- The pages of a paged preview (its `pages`, `totalMessages` and `edits`):
--- the messages a context edit removed in their place, a line for each run
--- of messages left out. `budget` (characters, for the chat): the newest messages
--- that fit in it and a line for the older ones, which `more` (a key) shows.
function Builder:context(result, budget, more)
  local removed = {}
  for _, mark in ipairs(result.edits or {}) do
    if mark.kind == "omitted" then
      removed[#removed + 1] = mark
    end
  end
  local function removed_before(position, last)
    for _, mark in ipairs(removed) do
      if mark.position == position or (last and mark.position > position) then
        self:removed(mark)
      end
    end
  end
  local first, cut_first = first_within(result, budget)
  local function left_out(from, to)
    self:blank()
    local hint = to == first and first > 0 and (" (%s shows more)"):format(more) or ""
    self:add(("_… messages %d to %d not shown%s_"):format(from + 1, to, hint))
  end
  local shown, total = 0, result.totalMessages or 0
  for _, page in ipairs(result.pages or {}) do
    for i, item in ipairs(page.messages or {}) do
      local position = page.start + i - 1
      if position >= first then
        if position > shown then
          left_out(shown, position)
        end
        removed_before(position)
        if position == first and cut_first then
          local b = M.builder()
          b:message(item.message or {}, item.entryId, item.edited)
          self:extend(cut(b, budget, more))
        else
          self:message(item.message or {}, item.entryId, item.edited)
        end
        shown = position + 1
      end
    end
  end
  if shown < total then
    left_out(shown, total)
  else
    removed_before(total, true)
  end
end

-- -- a message being streamed ----------------------------------------------------------------

--- A reply under construction from message_start and message_update deltas.
function M.live(message)
  local live = { role = "assistant", model = message and message.model, content = {} }
  for i, block in ipairs(message and message.content or {}) do
    live.content[i] = vim.deepcopy(block)
  end
  return live
end

local DELTA_BLOCK = { text_delta = "text", thinking_delta = "thinking", toolcall_delta = "toolCall" }
local DELTA_FIELD = { text = "text", thinking = "thinking", toolCall = "partial" }

--- Apply a coalesced `deltas` list (contentIndex is 0-based) to a live reply.
function M.apply_deltas(live, deltas)
  for _, delta in ipairs(deltas or {}) do
    local kind = DELTA_BLOCK[delta.type]
    if kind then
      local index = (delta.contentIndex or 0) + 1
      for i = #live.content + 1, index do
        live.content[i] = { type = kind }
      end
      local block = live.content[index]
      if block.type ~= kind then
        block.type = kind
      end
      local field = DELTA_FIELD[kind]
      block[field] = (block[field] or "") .. (delta.delta or "")
      if kind == "toolCall" then
        block.arguments = block.partial -- shown raw until message_end brings the parsed call
      end
    end
  end
end

return M
