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
-- What of a line tells its entry's id (`{"type":"message","id":"…"`), and a little more.
local HEAD_BYTES = 256

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

--- Whether one of the first PROMPT_LINES lines of `path` past byte `since`, starting within
--- PROMPT_BYTES of it, is the entry `id`: by the line's head, so the prompt's own line, 16 MiB
--- of code and images or more, is not read.
local function entry_starts_since(path, since, id)
  local file = io.open(path, "rb")
  if not file then
    return false
  end
  -- The server writes an entry's id second, after its type; text inside a line has its
  -- quotes escaped.
  local mark = '"id":"' .. id .. '"'
  local function is_entry(at)
    file:seek("set", at)
    local head = (file:read(HEAD_BYTES) or ""):match("^[^\n]*")
    return head:find(mark, 1, true) ~= nil
  end
  local found, lines, read = is_entry(since), 1, 0
  while not found and lines < PROMPT_LINES and read < PROMPT_BYTES do
    file:seek("set", since + read)
    local data = file:read(math.min(CHUNK, PROMPT_BYTES - read))
    if not data then
      break
    end
    local stop = data:find("\n", 1, true)
    while stop and not found and lines < PROMPT_LINES and read + stop < PROMPT_BYTES do
      lines = lines + 1
      found = is_entry(since + read + stop)
      stop = data:find("\n", stop + 1, true)
    end
    read = read + #data
  end
  file:close()
  return found
end

--- Whether the session file `uri`, in its first lines past byte `since`, holds a user message
--- sent as `text`: the entry `id` where the server named it (pi.prompt's promptId).
function M.prompt_written_since(uri, since, text, id)
  if id then
    return entry_starts_since(vim.uri_to_fname(uri), since, id)
  end
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
