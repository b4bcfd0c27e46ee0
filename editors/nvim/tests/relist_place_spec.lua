-- A chat read in a window the user left keeps its place when another program appends to
-- another session (the server says the list changed, at most once a second, and the list is
-- read again): before, each read redrew the chat and moved its window to the end.
-- PI_LSP_OTHER_SESSION: the other session's file.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local util = require("pi_lsp.util")

vim.cmd("PiChat")
local chat = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local chat_win = vim.fn.bufwinid(chat)
vim.api.nvim_win_set_cursor(chat_win, { 5, 0 })
vim.cmd("new") -- the user goes on in another window
local listed = 0
util.on("listed", function()
  listed = listed + 1
end)
local f = assert(io.open(os.getenv("PI_LSP_OTHER_SESSION"), "a"))
f:write(vim.json.encode({ type = "message", id = "cli00001", parentId = vim.NIL,
  timestamp = "2026-12-05T20:00:00.000Z",
  message = { role = "user", content = "from the CLI", timestamp = 1764964800000 } }) .. "\n")
f:close()
H.wait(function()
  return listed > 0 -- (the chat heard it first: it listened first)
end, "the list was not read again after another session changed", chat)
H.check(vim.api.nvim_win_get_cursor(chat_win)[1] == 5, "the chat's window moved to its end", chat)
H.finish()
