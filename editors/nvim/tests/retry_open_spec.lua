-- A chat opened while a turn waits to ask again for a failed reply shows the wait, counted down
-- where the busy line is, as a chat open all along does; <C-c> ends it.
-- Fake server: a 529 overloaded_error (the folder's retry.baseDelayMs: a minute).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local util = require("pi_lsp.util")

local waiting = false
util.on("turn", function(note)
  waiting = waiting or (note.event or {}).type == "auto_retry_start"
end)
local uri
for _, s in ipairs(H.exec("pi.listSessions").sessions) do
  uri = uri or s.uri
end
H.exec("pi.prompt", { uri = uri, text = "Try it" })
H.wait(function()
  return waiting
end, "the retry's wait did not start")

local chat = require("pi_lsp.chat").open(uri)
H.wait(function()
  return H.contains(chat.buf, "All green: 14 passed.") and H.contains(chat.buf, "_↻ retrying (1/3) in ")
end, "the chat did not show the wait", chat.buf)
H.check(H.text(chat.buf):find("_↻ retrying %(1/3%) in %d+ s… %(<C%-c> abort%)_") ~= nil, "the wait, its try and how to stop it", chat.buf)
H.check(not H.contains(chat.buf, "pi is working"), "in place of the busy line", chat.buf)
H.keys("<C-c>")
H.wait(function()
  return not chat.busy and H.contains(chat.buf, "**`⚠ Retry failed after 1 attempt: Retry cancelled`**")
end, "the cancelled wait did not end the turn", chat.buf)
H.check(not H.contains(chat.buf, "↻ retrying"), "the wait's line went with it", chat.buf)
H.finish()
