-- A failed tool call's error reads as written (PI_LSP_TOOL_ERRORS: a session whose read failed
-- with PI_LSP_ERROR): its result's row, folded (the fold's text) and opened (Markdown's conceal);
-- its call's row too.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_TOOL_ERRORS")))
local chat_buf = H.wait_buf("pi://chat/tool_errors", "All done", "the chat of a failed read did not render")
local error = os.getenv("PI_LSP_ERROR")
-- (A last backtick is a space apart from the code span's: the space shows, after it.)
local expected = "▸ ✗ read: " .. error .. (error:find("`$") and " " or "") .. "  t`1" -- (its entry id: t`1)
local lnum = H.line_of(chat_buf, "✗ read: ")
local folded = vim.api.nvim_win_call(vim.fn.bufwinid(chat_buf), function()
  return vim.fn.foldtextresult(lnum)
end)
H.check(vim.startswith(folded, expected .. "  … "), ("folded, as written:\n%s\nnot\n%s"):format(expected, folded), chat_buf)
local shown = H.shown(chat_buf, lnum)
H.check(shown == expected, ("opened, as written:\n%s\nnot\n%s"):format(expected, shown), chat_buf)
-- The call's row (PI_LSP_PATH: its path), opened, and its fold's text.
local call = "▸ → read(" .. os.getenv("PI_LSP_PATH") .. ")"
local call_line = H.line_of(chat_buf, "→ read")
local call_folded = vim.api.nvim_win_call(vim.fn.bufwinid(chat_buf), function()
  return vim.fn.foldtextresult(call_line)
end)
H.check(vim.startswith(call_folded, call .. "  … "), ("the call folded:\n%s\nnot\n%s"):format(call, call_folded), chat_buf)
H.check(H.shown(chat_buf, call_line) == call, "the call opened: " .. H.shown(chat_buf, call_line), chat_buf)
H.dump(":PiChat (a tool's error of Markdown's punctuation)", chat_buf, 8)
H.finish()
