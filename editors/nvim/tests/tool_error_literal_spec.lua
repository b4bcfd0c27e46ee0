-- A failed tool call's error reads as written (PI_LSP_TOOL_ERRORS: a session whose read failed
-- with PI_LSP_ERROR): its result's row, folded (the fold's text) and opened (Markdown's conceal).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_TOOL_ERRORS")))
local chat_buf = H.wait_buf("pi://chat/tool_errors", "All done", "the chat of a failed read did not render")
local error = os.getenv("PI_LSP_ERROR")
-- (A last backtick is a space apart from the code span's: the space shows, after it.)
local expected = "▸ ✗ read: " .. error .. (error:find("`$") and " " or "") .. "  t1"
local lnum = H.line_of(chat_buf, "✗ read: ")
local folded = vim.api.nvim_win_call(vim.fn.bufwinid(chat_buf), function()
  return vim.fn.foldtextresult(lnum)
end)
H.check(vim.startswith(folded, expected .. "  … "), ("folded, as written:\n%s\nnot\n%s"):format(expected, folded), chat_buf)
local shown = H.shown(chat_buf, lnum)
H.check(shown == expected, ("opened, as written:\n%s\nnot\n%s"):format(expected, shown), chat_buf)
H.dump(":PiChat (a tool's error of Markdown's punctuation)", chat_buf, 8)
H.finish()
