-- A prompt the stopped server wrote with more than 16 MiB of code and images is found by the
-- id the server named (pi.prompt's promptId): the check stopped 16 MiB past the size noted,
-- inside the prompt's own line, and the prompt came back to the input though the file held it.
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
local image = '{"type":"image","data":"' .. ("A"):rep(6 * 1024 * 1024) .. '","mimeType":"image/png"}'
-- Written as the server writes it, its type and id first (vim.json.encode keeps no key order).
local prompt = '{"type":"message","id":"ab12cd34","parentId":"ee11ee11","timestamp":"' .. stamp
  .. '","message":{"role":"user","content":[{"type":"text","text":"look at these"},{"type":"text","text":"'
  .. ("x"):rep(100000) .. '"},' .. table.concat({ image, image, image }, ",") .. '],"timestamp":1}}\n'
local written = line({ type = "thinking_level_change", id = "t1", timestamp = stamp, thinkingLevel = "low" })
  .. line({ type = "compaction", id = "c1", parentId = "t1", timestamp = stamp,
    summary = ("s"):rep(200000), firstKeptEntryId = "t1", tokensBefore = 1 })
  .. prompt
  .. line({ type = "custom", id = "r", parentId = "ab12cd34", timestamp = stamp, customType = "x", data = "y" })
local file = assert(io.open(path, "wb"))
file:write(header .. written)
file:close()
H.check(#written > 16 * 1024 * 1024, "the prompt's line is past the bound")

local reads = H.count_reads()
local uri = vim.uri_from_fname(path)
H.check(sessionfile.prompt_written_since(uri, #header, "look at these", "ab12cd34"), "the prompt was not found")
H.check(reads.bytes > 0 and reads.bytes < 1024 * 1024, ("read %d bytes to find it"):format(reads.bytes))
reads.stop()
H.check(not sessionfile.prompt_written_since(uri, #header, "look at these", "ffff0000"), "another entry's id was found")
H.check(not sessionfile.prompt_written_since(uri, #header, "look at these", "ee11ee11"), "a parentId was taken for an id")
H.check(not sessionfile.prompt_written_since(uri, vim.fn.getfsize(path) + 1, "look at these", "ab12cd34"),
  "a shorter file is another one")
vim.fn.delete(dir, "rf")
H.finish()
