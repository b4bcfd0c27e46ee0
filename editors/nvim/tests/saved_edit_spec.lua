-- In a workspace whose folder has a space and non-ASCII letters in its name (Neovim sends
-- its URIs percent-encoded): a turn edits an open file, the user saves it, a second turn
-- edits it again: both edits land in the buffer, the disk as the user saved it (checked by
-- tests/test_nvim.py). PI_LSP_FIRST: the file's first line as the buffer shows it ("café" of a
-- latin1 file).
-- Fake server: an edit of notes.txt, a text reply; another edit, a text reply.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local pi = require("pi_lsp")
local file = os.getenv("PI_LSP_WORKSPACE") .. "/notes.txt"
local first = os.getenv("PI_LSP_FIRST") or "one"

vim.cmd("edit " .. vim.fn.fnameescape(file))
local notes = vim.api.nvim_get_current_buf()
vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local input_buf = H.find_buf("pi://input/")

local function turn(prompt, reply)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { prompt })
  H.keys("<CR>")
  H.wait(function()
    return H.contains(chat_buf, reply) and not pi.statusline():find("busy", 1, true)
  end, "the turn did not end", chat_buf)
end

local function check(buffer)
  local shown = table.concat(H.lines(notes), "|")
  H.check(shown == buffer and vim.bo[notes].modified,
    ("the buffer %s (modified: %s), the disk %s"):format(shown, vim.bo[notes].modified,
      table.concat(vim.fn.readfile(file), "|")))
end

turn("Make two loud", "made two loud")
check(first .. "|TWO|three")
vim.api.nvim_buf_call(notes, function()
  vim.cmd("silent write")
end)
turn("Make three loud", "made three loud")
check(first .. "|TWO|THREE")
H.finish()
