-- With toolApproval = "ask" and two tabs: answering a write's approval diff (`a`, then `r`)
-- closes its tab and puts the user back in the window they were in, not in the next tab; that
-- window closed meanwhile, in its tab.
-- Fake server: a write of notes.txt, a text reply; another write, a text reply; a third write,
-- a text reply.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local pi = require("pi_lsp")

vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local input_buf = H.find_buf("pi://input/")
vim.cmd("tabnew") -- a second tab, right of the chat's
vim.cmd("tabfirst")
local chat_tab, input_win = vim.api.nvim_get_current_tabpage(), vim.fn.bufwinid(input_buf)

--- Send `prompt` from the chat's input, answer its write's diff with `key`, wait for `reply`;
--- `close_first`: the input's window is closed while the diff is shown.
local function answer_with(key, prompt, reply, close_first)
  vim.api.nvim_set_current_win(input_win)
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { prompt })
  H.keys("<CR>")
  H.wait(function()
    return vim.endswith(vim.api.nvim_buf_get_name(0), "/notes.txt (proposed)")
  end, "the approval diff did not open", chat_buf)
  if close_first then
    vim.api.nvim_win_close(input_win, true)
  end
  H.keys(key)
  H.check(#vim.api.nvim_list_tabpages() == 2, "the diff's tab closed")
  H.check(vim.api.nvim_get_current_tabpage() == chat_tab and (close_first or vim.api.nvim_get_current_win() == input_win),
    "`" .. key .. "` left the user in tab " .. vim.fn.tabpagenr() .. ", " .. vim.api.nvim_buf_get_name(0))
  H.wait(function()
    return H.contains(chat_buf, reply) and not pi.statusline():find("busy", 1, true)
  end, "the turn did not end", chat_buf)
end

answer_with("a", "Write notes.txt", "wrote it")
answer_with("r", "Write notes.txt again", "not written")
answer_with("r", "Write notes.txt once more", "left alone", true)
H.finish()
