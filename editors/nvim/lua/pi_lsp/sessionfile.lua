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

--- The bytes of `path` past `since` ("" when the file is shorter: another file now, which
--- says nothing of what was appended).
local function read_from(path, since)
  local file = io.open(path, "rb")
  if not file then
    return ""
  end
  local size = file:seek("end")
  local text = ""
  if size and size > since then
    file:seek("set", since)
    text = file:read(size - since) or ""
  end
  file:close()
  return text
end

--- Whether the session file `uri`, past byte `since`, holds a user message sent as `text`.
function M.prompt_written_since(uri, since, text)
  for line in vim.gsplit(read_from(vim.uri_to_fname(uri), since), "\n", { plain = true }) do
    local ok, entry = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
    if ok and type(entry) == "table" and entry.type == "message" and type(entry.message) == "table"
        and entry.message.role == "user" and M.sent_text(entry.message.content) == text then
      return true
    end
  end
  return false
end

return M
