-- A message of one line longer than the chat's budget (PI_LSP_LINE: 300 KB on one line, with
-- a two-byte letter where the budget falls) shows its start, cut there on a whole character,
-- then the line saying what was cut; `+` shows the rest.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local BUDGET = 200000

vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_LINE")))
local chat_buf = H.wait_buf("pi://chat/line", "not shown (+ shows more)", "the chat did not render")
H.check(#H.text(chat_buf) <= BUDGET + 1000, "the chat holds its budget: " .. #H.text(chat_buf))
H.check(H.contains(chat_buf, "Log start.") and not H.contains(chat_buf, "Log end."),
  "the line's start is shown, not its end", chat_buf)
local long = H.lines(chat_buf)[H.line_of(chat_buf, "Log start.")]
H.check(vim.endswith(long, "é") and #long > BUDGET * 0.9,
  "the line is cut on a whole character, near the budget: " .. #long .. " bytes")

vim.api.nvim_set_current_win(vim.fn.bufwinid(chat_buf))
H.keys("+")
H.check(H.contains(chat_buf, "Log end."), "+ shows the rest of the line", chat_buf)
H.finish()
