-- `q` in a context buffer or a chat that fills the tab: :close refused the last window (E444),
-- so `q` in the context did nothing, and in the chat closed the input and left the chat.
-- Each now leaves an empty buffer in that window, as `q` in the tree does.
-- Fake server: nothing (no prompt is sent).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

--- The names of the buffers the windows show.
local function shown()
  return vim.tbl_map(function(win)
    return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))
  end, vim.api.nvim_list_wins())
end

vim.cmd("PiContext")
H.wait(function()
  return vim.startswith(vim.api.nvim_buf_get_name(0), "pi://context/") and #H.lines(0) > 1
end, "the context did not open")
vim.cmd("only")
vim.v.errmsg = ""
H.keys("q")
H.check(vim.v.errmsg == "", "q in the context: " .. vim.v.errmsg)
H.check(vim.deep_equal(shown(), { "" }), "q in the context left " .. vim.inspect(shown()))

vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
vim.cmd("wincmd t | close") -- the chat and its input fill the tab
vim.api.nvim_set_current_win(vim.fn.bufwinid(chat_buf))
vim.v.errmsg = ""
H.keys("q")
H.check(vim.v.errmsg == "", "q in the chat: " .. vim.v.errmsg)
H.check(vim.deep_equal(shown(), { "" }), "q in the chat left " .. vim.inspect(shown()))
H.finish()
