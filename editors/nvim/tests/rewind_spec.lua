-- Rewinding files from the tree: after `b` the tree offers to restore the
-- files (diff first), `U` undoes it, `R` on an entry shows the diff and a
-- Cancel leaves the files alone; `s` offers the restore as `b` does.
-- The fake server is scripted with: write notes.txt "v1", "wrote v1",
-- write notes.txt "v2", "wrote v2", then the branch summary.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local workspace = os.getenv("PI_LSP_WORKSPACE")
local notes = workspace .. "/notes.txt"
local function read(path)
  local file = io.open(path)
  if not file then
    return nil
  end
  local text = file:read("*a")
  file:close()
  return text
end

local uri = H.exec("pi.newSession", { name = "rewind" }).uri
local function prompt(text, reply)
  H.exec("pi.prompt", { uri = uri, text = text })
  local tree
  H.wait(function()
    tree = H.exec("pi.getTree", { uri = uri })
    local last = tree.nodes[#tree.nodes]
    -- The reply is written before the turn ends (the editor is asked about the files first).
    return last and last.preview == reply and not require("pi_lsp.session").busy(uri)
  end, "the turn did not end with " .. reply)
  return tree.nodes[#tree.nodes].id
end
local first = prompt("write v1", "wrote v1")
local second = prompt("write v2", "wrote v2")
H.check(read(notes) == "v2\n", "the second turn wrote v2")

require("pi_lsp.tree").open(uri)
local tree
H.wait(function()
  tree = H.find_buf("pi://tree/")
  return tree and H.entry(tree, first) ~= nil
end, "the tree did not show the first reply", tree)

-- `b` on the first reply: the leaf moves, the diff shows, Restore is picked.
local asked
table.insert(H.selects, function(items, opts)
  asked = opts.prompt
  return items[1]
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, first), 0 })
H.keys("b")
-- The file changes on disk before the answer (with its undo id) reaches Neovim: wait for both.
H.wait(function()
  return read(notes) == "v1\n" and next(require("pi_lsp.rewind").undo_ids) ~= nil
end, "the files were not restored after branching")
H.check(asked and asked:find("1 file(s) differ from this entry. Restore 1 file(s) to entry " .. first, 1, true),
  "the branch offered the restore: " .. tostring(asked))
local diff = H.find_buf("pi://files/" .. first)
H.check(diff and H.contains(diff, "-v2") and H.contains(diff, "+v1") and vim.bo[diff].filetype == "diff",
  "the diff was shown first", diff)
H.check(H.exec("pi.getTree", { uri = uri }).leafId ~= nil, "the leaf moved")
H.dump("restore files (diff)", diff)
-- `q` closes the diff's window.
vim.api.nvim_set_current_win(vim.fn.bufwinid(diff))
H.keys("q")
H.check(vim.fn.bufwinid(diff) == -1, "q closed the diff window")

-- `U` in the tree undoes the restore.
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("U")
H.wait(function()
  return read(notes) == "v2\n"
end, "U did not undo the restore")

-- `R` on the entry shows the diff again; Cancel changes nothing.
table.insert(H.selects, function(items)
  return items[2]
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, first), 0 })
H.keys("R")
H.wait(function()
  return #H.selects == 0
end, "R did not ask")
H.exec("pi.listModels") -- a round trip: a restore asked before it would have been done
H.check(read(notes) == "v2\n", "Cancel left the files alone")

-- Back on the v2 tip, `s` on the first reply: once summarized, the restore is offered too.
H.exec("pi.branch", { uri = uri, targetId = second })
asked = nil
table.insert(H.inputs, "")
table.insert(H.selects, function(items, opts)
  asked = opts.prompt
  return items[1]
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, first), 0 })
H.keys("s")
H.wait(function()
  -- Wait for the answer too: it carries the undo id `U` needs.
  return read(notes) == "v1\n" and H.messages[#H.messages]:find("restored 1 file(s) to entry", 1, true)
end, "the files were not restored after branching with a summary")
H.check(vim.tbl_contains(H.messages, "pi-lsp: branched to " .. first .. " with a summary"), "the summary job finished")
H.check(asked and asked:find("1 file(s) differ from this entry. Restore 1 file(s) to entry ", 1, true),
  "the summarized branch offered the restore: " .. tostring(asked))
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("U")
H.wait(function()
  return read(notes) == "v2\n"
end, "U did not undo the restore after the summarized branch")

-- A restore stopped part-way (an editor refusing a change after a file was written on disk)
-- answers an error whose data carries the undo id, its message the server's words: `U` then
-- undoes the part done. The restore runs for real, so the id is real; only its answer is
-- turned into that error.
local client = require("pi_lsp.client")
local exec = client.exec
local said
client.exec = function(command, args, callback, root)
  if command ~= "pi.restoreFiles" or not args.entryId then
    return exec(command, args, callback, root)
  end
  return exec(command, args, function(err, result)
    if err or not result then
      return callback(err, result)
    end
    said = "other.txt was not restored: the editor did not apply the change; but the restore had "
      .. ("changed notes.txt already: restore the undo snapshot %s to undo that"):format(result.undoId)
    callback({ code = -32011, message = said, data = { undoId = result.undoId } }, nil)
  end, root)
end
table.insert(H.selects, function(items)
  return items[1]
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, first), 0 })
H.keys("R")
H.wait(function()
  return said ~= nil and H.said("pi.restoreFiles: " .. said)
end, "the part-way restore's error was not shown")
client.exec = exec
H.check(read(notes) == "v1\n", "the restore wrote notes.txt before it stopped")
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("U")
H.wait(function()
  return read(notes) == "v2\n"
end, "U did not undo the restore stopped part-way")

H.finish()
