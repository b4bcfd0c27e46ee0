-- A reply that failed for a passing reason is asked for again: while pi waits, the chat says so
-- where the busy line was (as pi 1.6's "Retrying (1/3) in 20s..."), and the failed attempt shows
-- as what it is now, a reply left out of the context, as the transcript read after the turn
-- shows it; never as the turn's final error.
-- PI_LSP_RETRY: "cancelled" (a long wait, ended by <C-c>) or "retried" (a short wait, then a
-- reply held after word3 until "retried").
-- Fake server: a 529 overloaded_error of a long message, then (retried) the held reply.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chat = require("pi_lsp.chat")

local REMOVED = "## ~~assistant~~ removed from the context"
-- Whole, during the wait as after the turn (it was cut at 60 characters).
local FAILED = "_`[error] Anthropic 529 overloaded_error: Overloaded: every server is busy, try again in a minute or pick a model with more room`_"
local mode = os.getenv("PI_LSP_RETRY")

-- Every drawing of the chat, not only the one a wait finds: the failed reply was drawn as the
-- turn's error at its message_end, then redrawn as removed at auto_retry_start (a flash).
local util = require("pi_lsp.util")
local set_lines, drawn_as_error = util.set_lines, false
util.set_lines = function(buf, ...)
  set_lines(buf, ...)
  if vim.api.nvim_buf_get_name(buf):find("^pi://chat/") and H.contains(buf, "_`(error:") then
    drawn_as_error = true
  end
end

local chat_buf, _, uri = H.chat_send("Try it")

--- The failed attempt is shown once, as removed from the context, and no line says the turn
--- failed.
local function shows_the_attempt_removed()
  local text = H.text(chat_buf)
  H.check(select(2, text:gsub(vim.pesc(REMOVED), "")) == 1, "the failed attempt, once, as removed", chat_buf)
  H.check(H.contains(chat_buf, FAILED), "with its error", chat_buf)
  H.check(not H.contains(chat_buf, "_`(error:"), "no line says the turn failed", chat_buf)
  H.check(not drawn_as_error, "the failed reply was drawn as the turn's error before the retry's wait", chat_buf)
end

--- The transcript was read again after the turn: the removed entry carries its tokens and id.
local function reread()
  return H.text(chat_buf):find(vim.pesc(REMOVED) .. " · %d+ tokens  `%x+`") ~= nil and not chat.get(uri).busy
end

if mode == "cancelled" then
  H.wait(function()
    return H.contains(chat_buf, "_↻ retrying (1/3) in ")
  end, "the retry's wait was not shown", chat_buf)
  H.check(H.text(chat_buf):find("_↻ retrying %(1/3%) in %d+ s… %(<C%-c> abort%)_") ~= nil, "the wait, its try and how to stop it", chat_buf)
  H.check(not H.contains(chat_buf, "pi is working"), "in place of the busy line", chat_buf)
  shows_the_attempt_removed()
  H.dump(":PiChat (a retry's wait)", chat_buf, 12)
  H.keys("<C-c>")
  H.wait(reread, "the cancelled turn did not end", chat_buf)
  H.check(not H.contains(chat_buf, "↻ retrying"), "the wait's line went with it", chat_buf)
  H.check(H.contains(chat_buf, "**`⚠ Retry failed after 1 attempt: Retry cancelled`**"), "the end says why, as pi 1.6", chat_buf)
  shows_the_attempt_removed()
else
  H.wait(function()
    return H.contains(chat_buf, "word3")
  end, "the retry's reply did not stream", chat_buf)
  H.check(not H.contains(chat_buf, "↻ retrying"), "the wait is over: its line went", chat_buf)
  H.check(H.contains(chat_buf, "pi is working"), "the busy line is back", chat_buf)
  shows_the_attempt_removed()
  H.release("retried")
  H.wait(function()
    return reread() and H.contains(chat_buf, "word59")
  end, "the retried turn did not end", chat_buf)
  shows_the_attempt_removed()
  H.check(not H.contains(chat_buf, "⚠"), "a retry that worked leaves no error", chat_buf)
end
H.finish()
