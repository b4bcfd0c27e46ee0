-- What a session file holds past a point: whether a prompt sent to a server that stopped
-- before its turn was seen to start was written (the file is the truth; the server's events
-- may be lost with it).
local M = {}

--- The text a user message was sent with: its first text block (the server adds the
--- code attached to it as more text blocks).
function M.sent_text(content)
  if type(content) == "string" then
    return content
  end
  for _, block in ipairs(type(content) == "table" and content or {}) do
    if type(block) == "table" and block.type == "text" then
      return block.text
    end
  end
end

--- The size in bytes of the session file `uri` now; 0 when it is not there (yet).
function M.size(uri)
  local stat = vim.uv.fs_stat(vim.uri_to_fname(uri))
  return stat and stat.size or 0
end

-- What a turn writes from the size noted to its prompt: a new file's header, the thinking
-- level recorded on resuming and at the prompt's start, a compaction, then the user message (the
-- prompt and its attached code, 100 000 characters a file). What follows is the turn's own, or
-- another file's (one that replaced the session, of any size): not read.
local PROMPT_LINES = 8
local PROMPT_BYTES = 16 * 1024 * 1024
local CHUNK = 64 * 1024

--- The first PROMPT_LINES lines of `path` past byte `since`, read while within PROMPT_BYTES
--- of it: none when the file is shorter (another file now, which says nothing).
local function lines_from(path, since)
  local file = io.open(path, "rb")
  if not file then
    return {}
  end
  local lines, parts, read = {}, {}, 0 -- parts: the line read so far
  file:seek("set", since)
  while #lines < PROMPT_LINES and read < PROMPT_BYTES do
    local data = file:read(math.min(CHUNK, PROMPT_BYTES - read))
    if not data then
      local last = table.concat(parts)
      if last ~= "" then
        table.insert(lines, last) -- the last line, unended
      end
      break
    end
    read = read + #data
    local start = 1
    local stop = data:find("\n", start, true)
    while stop and #lines < PROMPT_LINES do
      table.insert(parts, data:sub(start, stop - 1))
      table.insert(lines, table.concat(parts))
      parts, start = {}, stop + 1
      stop = data:find("\n", start, true)
    end
    table.insert(parts, data:sub(start))
  end
  file:close()
  return lines
end

--- Whether the session file `uri`, in its first lines past byte `since`, holds a user message
--- sent as `text`.
function M.prompt_written_since(uri, since, text)
  for _, line in ipairs(lines_from(vim.uri_to_fname(uri), since)) do
    local ok, entry = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
    if ok and type(entry) == "table" and entry.type == "message" and type(entry.message) == "table"
        and entry.message.role == "user" and M.sent_text(entry.message.content) == text then
      return true
    end
  end
  return false
end

return M
