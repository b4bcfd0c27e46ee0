-- An error reads as the provider wrote it: the chat draws Markdown with its markup concealed,
-- and the backticks, `*`, `_`, brackets and links of an error vanished ("`model` must be one
-- of *gpt-5* or [docs](https://x.y)" read "model must be one of gpt-5 or docs"). Each line
-- that shows it (the failed attempt left out, the retry's notice, the failed reply kept) shows
-- it whole on the screen, and `yy` on it copies it whole.
-- Fake server: two 529 overloaded_errors of PI_LSP_ERROR; pi asks again once.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chat = require("pi_lsp.chat")

local FULL = "Anthropic 529 overloaded_error: " .. os.getenv("PI_LSP_ERROR")

local chat_buf, _, uri = H.chat_send("Try it")
H.wait(function()
  return not chat.get(uri).busy and H.contains(chat_buf, "Retry failed")
    and H.text(chat_buf):find("removed from the context · %d+ tokens") ~= nil
end, "the retried turn did not end", chat_buf)

for _, expected in ipairs({
  "[error] " .. FULL,
  "⚠ Retry failed after 1 attempt: " .. FULL,
  "(error: " .. FULL .. ")",
}) do
  local lnum
  for i, line in ipairs(H.lines(chat_buf)) do
    if line:find(expected:sub(1, 20), 1, true) then
      lnum = i
    end
  end
  H.check(lnum ~= nil, "a line shows " .. expected, chat_buf)
  local shown = H.shown(chat_buf, lnum)
  -- (A last backtick is a space apart from the code span's: the space shows, after it.)
  H.check(shown == expected .. (expected:find("`$") and " " or ""), ("shown as written:\n%s\nnot\n%s"):format(expected, shown), chat_buf)
  vim.api.nvim_win_call(vim.fn.bufwinid(chat_buf), function()
    vim.api.nvim_win_set_cursor(0, { lnum, 0 })
    vim.cmd("normal! yy")
  end)
  H.check(vim.fn.getreg('"'):find(FULL, 1, true) ~= nil, "yy copies it whole: " .. vim.fn.getreg('"'), chat_buf)
end
H.dump(":PiChat (an error of Markdown's punctuation)", chat_buf, 8)
H.finish()
