-- What a restore leaves alone is shown: after the diff, each such path with why (the server's
-- `why`, else a fixed reason), one line each, and the messages count them. The first turn
-- wrote notes.txt "v1" and the file `out`, the second notes.txt "v2"; then `out` became a
-- folder holding a file over the snapshot cap, named with a line break and escapes. So `out`
-- is in the way (why) and the big file is skipped: nothing differs from the second reply,
-- yet the files do not "already match" it.
-- The fake server is scripted with: write notes.txt and out, "wrote v1", write notes.txt,
-- "wrote v2".
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local workspace = os.getenv("PI_LSP_WORKSPACE")
local function read(path)
  local file = io.open(path)
  if not file then
    return nil
  end
  local text = file:read("*a")
  file:close()
  return text
end
local notes = workspace .. "/notes.txt"

local uri = H.exec("pi.newSession", { name = "left alone" }).uri
local function prompt(text, reply)
  H.exec("pi.prompt", { uri = uri, text = text })
  local tree
  H.wait(function()
    tree = H.exec("pi.getTree", { uri = uri })
    local last = tree.nodes[#tree.nodes]
    return last and last.preview == reply and not require("pi_lsp.session").busy(uri)
  end, "the turn did not end with " .. reply)
  return tree.nodes[#tree.nodes].id
end
local first = prompt("write v1", "wrote v1")
local second = prompt("write v2", "wrote v2")
H.check(read(notes) == "v2\n" and read(workspace .. "/out") == "made\n", "the turns wrote their files")

-- `out` becomes a folder with a file no snapshot keeps, whose name would break a line.
local big_name = "big\n\27[31m[run](command:workbench.action.quit)\7.bin"
assert(os.remove(workspace .. "/out"))
vim.fn.mkdir(workspace .. "/out")
local big = assert(io.open(workspace .. "/out/" .. big_name, "wb"))
big:write(string.rep("x", 5 * 1024 * 1024 + 1))
big:close()
local big_line = "left alone (ignored, unreadable, or too large to snapshot): "
  .. "out/big  [31m[run](command:workbench.action.quit) .bin" -- each control character a space
local out_line = "left alone (out is a folder holding "

require("pi_lsp.tree").open(uri)
local tree
H.wait(function()
  tree = H.find_buf("pi://tree/")
  return tree and H.entry(tree, second) ~= nil
end, "the tree did not show the second reply", tree)
local function restore_key(entry)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
  vim.api.nvim_win_set_cursor(0, { H.entry(tree, entry), 0 })
  H.keys("R")
end
local function has_line(buf, prefix)
  for _, line in ipairs(H.lines(buf)) do
    if vim.startswith(line, prefix) then
      return true
    end
  end
  return false
end

-- `R` on the second reply: nothing to restore, and no question; the diff lists both paths.
local asked = false
table.insert(H.selects, function()
  asked = true
end)
restore_key(second)
H.wait_said("nothing to restore to entry " .. second .. "; 2 file(s) left alone, listed in the diff", true,
  "R did not say what it leaves alone")
local listed = H.find_buf("pi://files/" .. second)
H.check(listed and H.lines(listed)[1]:find(out_line, 1, true) == 1 and H.lines(listed)[2] == big_line
  and #H.lines(listed) == 2, "the diff lists what is left alone, one line each", listed)
H.check(not asked and not H.said("the files already match entry " .. second), "nothing was offered")
table.remove(H.selects)

-- `R` on the first reply: notes.txt is restored, the rest left alone, and the messages say so.
table.insert(H.selects, function(items)
  return items[1]
end)
restore_key(first)
H.wait(function()
  return read(notes) == "v1\n" and next(require("pi_lsp.rewind").undo_ids) ~= nil
end, "R did not restore notes.txt")
local diff = H.find_buf("pi://files/" .. first)
H.check(diff and H.contains(diff, "-v2") and H.contains(diff, "+v1") and has_line(diff, out_line)
  and H.lines(diff)[#H.lines(diff)] == big_line, "the diff, then what is left alone", diff)
H.wait_said("restored 1 file(s) to entry " .. first .. "; 2 left alone, see the diff (U in the tree undoes it)", true,
  "the restore did not count what it left alone")
H.check(read(workspace .. "/out/" .. big_name) ~= nil, "the big file stays")

vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("U")
H.wait_said("undid the restore: 1 file(s) back as they were; 1 left alone", true,
  "the undo did not count what it left alone")
H.check(read(notes) == "v2\n", "U put v2 back")

-- `b` says so too: on the first reply it asks, counting both; on the second, where only the
-- paths left alone differ, it says nothing (R lists them): such paths (a file over the cap)
-- may not differ at all, and every branch would speak of them.
local function said_since(start, text)
  for i = start + 1, #H.messages do
    if H.messages[i] == "pi-lsp: " .. text then
      return true
    end
  end
  return false
end
local function branch_key(entry)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
  vim.api.nvim_win_set_cursor(0, { H.entry(tree, entry), 0 })
  H.keys("b")
end
local prompt_asked
table.insert(H.selects, function(_, opts)
  prompt_asked = opts.prompt
  return nil
end)
branch_key(first)
H.wait(function()
  return prompt_asked ~= nil
end, "b on the first reply did not offer the restore")
H.check(prompt_asked == "1 file(s) differ from this entry, and a restore leaves 2 alone (listed in the diff). "
  .. "Restore 1 file(s) to entry " .. first .. "?", "b counted what a restore leaves alone: " .. prompt_asked)
H.check(read(notes) == "v2\n", "declined: nothing restored")
local start = #H.messages
asked = false
table.insert(H.selects, function()
  asked = true
end)
-- The offer follows the branch's message in the same callback: once that is said, a diff
-- asked for would be among the requests.
local client = require("pi_lsp.client")
local run, asked_for = client.run, {}
client.run = function(command, ...)
  asked_for[#asked_for + 1] = command
  return run(command, ...)
end
branch_key(second)
H.wait(function()
  return said_since(start, "leaf is now " .. second)
end, "b on the second reply did not branch")
client.run = run
H.check(not vim.tbl_contains(asked_for, "pi.fileChanges"), "b asked for a diff with no file to restore")
H.check(not asked, "nothing was asked")
table.remove(H.selects)

-- As the second reply left them, nothing differs and nothing is left alone: only then do they match.
assert(os.remove(workspace .. "/out/" .. big_name) and os.remove(workspace .. "/out"))
local out = assert(io.open(workspace .. "/out", "w"))
out:write("made\n")
out:close()
restore_key(second)
H.wait_said("the files already match entry " .. second, true, "R did not say the files match")

H.finish()
