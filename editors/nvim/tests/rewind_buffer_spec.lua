-- Rewinding a turn that only edited a file open in Neovim: the edit stays in
-- the buffer (workspace/applyEdit, never saved), yet `R` on the prompt shows
-- the diff against the buffer and restores it through the editor; `U` puts the
-- turn's text back the same way. A file the next turn made, open when `R`
-- removes it, is deleted through Neovim: its buffer goes with it.
-- The fake server is scripted with: edit limits.py, then "raised it"; write
-- made.py, then "made it".
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local client = H.setup()
local path = vim.fn.getcwd() .. "/limits.py"
local function disk()
  local file = assert(io.open(path))
  local text = file:read("*a")
  file:close()
  return text
end
local function line()
  return vim.api.nvim_buf_get_lines(vim.fn.bufnr(path), 0, -1, false)[1]
end

local file = assert(io.open(path, "w"))
file:write("LIMIT = 1\n")
file:close()
vim.cmd.edit(path)
local buf = vim.api.nvim_get_current_buf()
H.wait(function()
  return vim.lsp.buf_is_attached(buf, client.id)
end, "the file buffer was not synced to the server")

local uri = H.exec("pi.newSession", { name = "open buffer" }).uri
H.exec("pi.prompt", { uri = uri, text = "raise the limit" })
local nodes
H.wait(function()
  nodes = H.exec("pi.getTree", { uri = uri }).nodes
  return nodes[#nodes].preview == "raised it" and not require("pi_lsp.session").busy(uri)
end, "the turn did not end")
H.check(line() == "LIMIT = 2" and vim.bo[buf].modified, "the turn edited the buffer: " .. tostring(line()))
H.check(disk() == "LIMIT = 1\n", "the disk waits for :write")
local asked
for _, node in ipairs(nodes) do
  asked = asked or (node.preview == "raise the limit" and node.id or nil)
end
H.check(asked, "the tree shows the prompt: " .. vim.inspect(nodes))

require("pi_lsp.tree").open(uri)
local tree
H.wait(function()
  tree = H.find_buf("pi://tree/")
  return tree and H.entry(tree, asked) ~= nil
end, "the tree did not show the prompt", tree)

-- `R` on the prompt: the state before the turn, compared with the buffer.
local question
table.insert(H.selects, function(items, opts)
  question = opts.prompt
  return items[1]
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, asked), 0 })
H.keys("R")
H.wait(function()
  return line() == "LIMIT = 1"
end, "R did not restore the buffer")
H.check(question and question:find("Restore 1 file(s) to entry " .. asked, 1, true), "R asked: " .. tostring(question))
local diff = H.find_buf("pi://files/" .. asked)
H.check(diff and H.contains(diff, "-LIMIT = 2") and H.contains(diff, "+LIMIT = 1"), "the diff is against the buffer", diff)
H.wait(function()
  return H.said("restored 1 file(s) to entry " .. asked .. ", 1 in open buffers, not saved (U in the tree undoes it)")
end, "the restore did not say it changed an open buffer: " .. vim.inspect(H.messages))
H.check(disk() == "LIMIT = 1\n", "the restore left the disk alone")

-- `U` puts the turn's text back into the buffer, again as an edit there.
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("U")
H.wait(function()
  return line() == "LIMIT = 2"
end, "U did not undo the restore in the buffer")
H.wait(function()
  return H.said("undid the restore: 1 file(s) back as they were, 1 in open buffers, not saved")
end, "the undo did not say it changed an open buffer: " .. vim.inspect(H.messages))

H.check(disk() == "LIMIT = 1\n" and vim.bo[buf].modified, "nothing was saved")

-- The next turn makes made.py; the user opens it. Rewinding to before that
-- turn deletes the file through Neovim, so no buffer keeps its old text.
local made = vim.fn.getcwd() .. "/made.py"
H.exec("pi.prompt", { uri = uri, text = "make a module" })
H.wait(function()
  nodes = H.exec("pi.getTree", { uri = uri }).nodes
  return nodes[#nodes].preview == "made it" and not require("pi_lsp.session").busy(uri)
end, "the second turn did not end")
local making
for _, node in ipairs(nodes) do
  making = making or (node.preview == "make a module" and node.id or nil)
end
vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
vim.cmd.edit(made)
local made_buf = vim.api.nvim_get_current_buf()
H.wait(function()
  return vim.lsp.buf_is_attached(made_buf, client.id)
end, "made.py was not synced to the server")
H.wait(function()
  return H.entry(tree, making) ~= nil
end, "the tree did not show the second prompt", tree)
table.insert(H.selects, function(items, opts)
  question = opts.prompt
  return items[1]
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, making), 0 })
H.keys("R")
H.wait(function()
  return H.said("restored 1 file(s) to entry " .. making .. " (U in the tree undoes it)")
end, "the restore did not end: " .. vim.inspect(H.messages))
H.check(question and question:find("Restore 1 file(s) to entry " .. making, 1, true), "R asked: " .. tostring(question))
H.check(not vim.api.nvim_buf_is_valid(made_buf), "the deleted file's buffer was left open")
H.check(vim.fn.filereadable(made) == 0, "made.py is still on disk")
H.check(line() == "LIMIT = 2" and vim.bo[buf].modified, "limits.py kept the turn's unsaved edit")

vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("U")
H.wait(function()
  return vim.fn.filereadable(made) == 1
end, "U did not bring made.py back")

H.finish()
