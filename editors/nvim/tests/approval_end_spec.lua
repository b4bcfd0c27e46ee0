-- With toolApproval = "ask": a write's approval diff goes when its turn ends
-- without an answer, by an abort or with the server.
-- Fake server: a write of notes.txt, then another.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local function proposed()
  return vim.iter(vim.api.nvim_list_bufs()):find(function(buf)
    return vim.endswith(vim.api.nvim_buf_get_name(buf), "/notes.txt (proposed)")
  end)
end

vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local input_buf = H.find_buf("pi://input/")

--- Send `prompt` and wait for its write's diff tab.
local function ask_to_write(prompt)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { prompt })
  H.keys("<CR>")
  H.wait(function()
    return proposed() ~= nil
  end, "the approval diff did not open", chat_buf)
  H.check(#vim.api.nvim_list_tabpages() == 2, "the diff is in a tab of its own")
  vim.cmd("tabfirst") -- back in the chat, the question unanswered
end

local function question_gone(why)
  H.wait(function()
    return proposed() == nil and #vim.api.nvim_list_tabpages() == 1
  end, "the approval diff stayed after " .. why, chat_buf)
end

-- <C-c> aborts the turn: its question goes with it.
ask_to_write("Write notes.txt")
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
H.keys("<C-c>")
question_gone("the turn ended")

-- The server dies while it asks.
ask_to_write("Write notes.txt again")
for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
  vim.uv.kill(pid, "sigkill")
end
question_gone("the server stopped")

H.finish()
