-- In a workspace whose folder has a space and non-ASCII letters in its name (Neovim sends
-- its URIs percent-encoded): a turn edits an open file, the user saves it, a second turn
-- edits it again: both edits land in the buffer, the disk as the user saved it.
-- Fake server: an edit of notes.txt, a text reply; another edit, a text reply.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local pi = require("pi_lsp")
local file = os.getenv("PI_LSP_WORKSPACE") .. "/notes.txt"

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

local function check(buffer, disk)
  local shown, saved = table.concat(H.lines(notes), "|"), table.concat(vim.fn.readfile(file), "|")
  H.check(shown == buffer and vim.bo[notes].modified and saved == disk,
    ("the buffer %s (modified: %s), the disk %s"):format(shown, vim.bo[notes].modified, saved))
end

turn("Make two loud", "made two loud")
check("one|TWO|three", "one|two|three")
vim.api.nvim_buf_call(notes, function()
  vim.cmd("silent write")
end)
turn("Make three loud", "made three loud")
check("one|TWO|THREE", "one|TWO|three")
H.finish()
