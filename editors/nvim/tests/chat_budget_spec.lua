-- The chat of a huge session (PI_LSP_MANY: 100 messages of 50 KB; PI_LSP_ONE: one message of
-- 300 KB in a code fence) shows its newest text within a budget and a line for the rest, which
-- `+` shows; a normal session's chat is the whole transcript, as it was.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local render = require("pi_lsp.render")
local BUDGET = 200000

local function size(buf)
  return #H.text(buf)
end

-- 100 messages: the newest ones fit, the 97 older are one line.
vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_MANY")))
local chat_buf = H.wait_buf("pi://chat/many", "Message 99 start.", "the huge chat did not render")
H.check(size(chat_buf) <= BUDGET + 1000, "the chat holds its budget, not 5 MB: " .. size(chat_buf))
H.check(H.contains(chat_buf, "_… messages 1 to 97 not shown (+ shows more)_"), "the older messages are one line", chat_buf)
H.check(H.contains(chat_buf, "Message 97 start.") and not H.contains(chat_buf, "Message 96 start."), "the newest three are whole", chat_buf)

-- `+` shows twice as much; the cursor stays on the text it was on.
local chat_win = vim.fn.bufwinid(chat_buf)
vim.api.nvim_set_current_win(chat_win)
local row = H.line_of(chat_buf, "Message 98 start.")
vim.api.nvim_win_set_cursor(chat_win, { row, 0 })
H.keys("+")
H.check(H.contains(chat_buf, "_… messages 1 to 93 not shown (+ shows more)_"), "+ shows four more", chat_buf)
H.check(size(chat_buf) <= 2 * BUDGET + 1000, "within the doubled budget: " .. size(chat_buf))
H.check(vim.api.nvim_get_current_line() == "Message 98 start.", "the cursor stayed: " .. vim.api.nvim_get_current_line())
vim.cmd("only")

-- One message larger than the budget: its start, the fence it opened closed, and a line.
vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_ONE")))
local one_buf = H.wait_buf("pi://chat/one", "One start.", "the one-message chat did not render")
H.check(size(one_buf) <= BUDGET + 1000, "one huge message is cut to the budget: " .. size(one_buf))
H.check(not H.contains(one_buf, "One end."), "its end is not shown", one_buf)
local lines = H.lines(one_buf)
local fences, cut_line = 0, nil
for lnum, line in ipairs(lines) do
  fences = fences + (line == "```" and 1 or 0)
  cut_line = line:find("more characters of this message not shown (+ shows more)", 1, true) and lnum or cut_line
end
H.check(fences == 2, "the fence it opened is closed before the line saying so: " .. fences)
H.check(cut_line and lines[cut_line - 2] == "```", "the line saying so comes after the fence", one_buf)

-- `+` shows the rest of the cut message below the cursor, which stays where it was.
vim.api.nvim_set_current_win(vim.fn.bufwinid(one_buf))
row = H.line_of(one_buf, "line 100 of a long message, **bold** and `code`")
vim.api.nvim_win_set_cursor(0, { row, 0 })
H.keys("+")
H.check(H.contains(one_buf, "One end."), "+ shows the rest of the message", one_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == row, "the cursor stayed on line " .. row .. ": " .. vim.api.nvim_win_get_cursor(0)[1])
vim.cmd("only")

-- A normal session: the chat is the whole transcript, as rendered without a budget.
local example = vim.fn.glob(vim.fn.getcwd() .. "/.pi/sessions/2026-11-30*.jsonl")
vim.cmd("PiChat " .. vim.fn.fnameescape(example))
local normal_buf = H.wait_buf("pi://chat/2026-11-30", "All green: 14 passed.", "the normal chat did not render")
local whole = render.builder()
whole:context(H.exec("pi.previewContext", { uri = vim.b[normal_buf].pi_lsp_uri, page = 50 }))
local shown = H.lines(normal_buf)
H.check(#whole.lines > 0 and vim.deep_equal(vim.list_slice(shown, 3, 2 + #whole.lines), whole.lines), "a normal chat is unchanged", normal_buf)
H.check(not H.contains(normal_buf, "not shown"), "nothing of a normal chat is left out", normal_buf)

H.finish()
