-- The check for a prompt a stopped server wrote (sessionfile.prompt_written_since) reads the
-- first lines past the size noted, not the rest of the file: it read the whole rest at once on
-- Neovim's main loop (a session replaced by a 219 MB file held it 2.25 s, 700 MB).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.prepare()
local sessionfile = require("pi_lsp.sessionfile")

local dir = vim.fn.tempname()
vim.fn.mkdir(dir, "p")
local path = dir .. "/s.jsonl"
local stamp = "2026-01-02T03:04:05.678Z"
local function line(entry)
  return vim.json.encode(entry) .. "\n"
end
local header = line({ type = "session", version = 3, id = "s", timestamp = stamp, cwd = dir })
local function level(id)
  return line({ type = "thinking_level_change", id = id, timestamp = stamp, thinkingLevel = "low" })
end
-- What a turn writes before its prompt: levels, a compaction; the prompt carries attached code.
local written = level("t1")
  .. line({ type = "compaction", id = "c1", parentId = "t1", timestamp = stamp,
    summary = ("s"):rep(200000), firstKeptEntryId = "t1", tokensBefore = 1 })
  .. level("t2")
  .. line({ type = "message", id = "u1", parentId = "t2", timestamp = stamp, message = {
    role = "user", timestamp = 1,
    content = { { type = "text", text = "my prompt" }, { type = "text", text = ("x"):rep(100000) } } } })
local reply = line({ type = "custom", id = "r", timestamp = stamp, customType = "x", data = ("y"):rep(10000) })
local function write(text)
  local file = assert(io.open(path, "wb"))
  file:write(text)
  file:close()
end
write(header .. written .. reply:rep(800)) -- the turn's own 8 MB after it

local reads = H.count_reads()
local uri = vim.uri_from_fname(path)
H.check(sessionfile.prompt_written_since(uri, #header, "my prompt"), "the prompt was not found")
H.check(reads.bytes > 0 and reads.bytes < 1024 * 1024, ("read %d bytes to find it"):format(reads.bytes))
reads.bytes = 0
H.check(not sessionfile.prompt_written_since(uri, #header, "another prompt"), "another prompt was found")
H.check(reads.bytes > 0 and reads.bytes < 1024 * 1024, ("read %d bytes not to find it"):format(reads.bytes))
reads.stop()
H.check(not sessionfile.prompt_written_since(uri, vim.fn.getfsize(path) + 1, "my prompt"),
  "a shorter file is another one")
write(header .. written:sub(1, -2)) -- the prompt, its line not ended
H.check(sessionfile.prompt_written_since(uri, #header, "my prompt"), "an unended last line was not read")
vim.fn.delete(dir, "rf")
H.finish()
