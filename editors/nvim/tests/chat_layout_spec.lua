-- The chat's window closed alone (:q in it, the input left open), then :PiChat: the chat goes
-- back above its input, the input its own height, as the chat first opened.
-- Fake server: nothing (no prompt is sent).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local config = require("pi_lsp.config")

--- The chat's and its input's windows, once both are shown.
local function windows()
  local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
  local chat_win, input_win = vim.fn.bufwinid(chat_buf), vim.fn.bufwinid(H.find_buf("pi://input/"))
  H.check(chat_win ~= -1 and input_win ~= -1, "the chat and its input are shown")
  return chat_win, input_win
end

--- The input right under the chat, in the same column, its own height.
local function laid_out(when)
  local chat_win, input_win = windows()
  local chat_at, input_at = vim.api.nvim_win_get_position(chat_win), vim.api.nvim_win_get_position(input_win)
  local layout = vim.inspect(vim.fn.winlayout())
  H.check(chat_at[2] == input_at[2] and vim.api.nvim_win_get_width(chat_win) == vim.api.nvim_win_get_width(input_win),
    when .. ": the chat and its input are in one column: " .. layout)
  H.check(input_at[1] == chat_at[1] + vim.api.nvim_win_get_height(chat_win) + 1 -- (the chat's statusline)
    and vim.api.nvim_win_get_height(input_win) == config.options.chat.input_height,
    when .. ": the input is under the chat, " .. config.options.chat.input_height .. " lines high: " .. layout
    .. " input at " .. vim.inspect(input_at) .. ", " .. vim.api.nvim_win_get_height(input_win) .. " lines")
  return chat_win, input_win
end

vim.cmd("PiChat")
local chat_win = laid_out("opened")
vim.api.nvim_win_close(chat_win, false) -- :q in the chat
vim.cmd("PiChat")
local _, input_win = laid_out("opened again")
H.check(vim.api.nvim_get_current_win() == input_win, "the cursor is in the input")
H.finish()
