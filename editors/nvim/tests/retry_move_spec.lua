-- A session moved to a new file (another program cut its file short) while its turn waits to
-- ask again for a failed reply: a chat opened on the new file shows the wait, one opened on
-- the cut file shows no turn.
-- Fake server: a 529 overloaded_error (the folder's retry.baseDelayMs: a minute).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local util = require("pi_lsp.util")

local waiting, moved = false, nil
util.on("turn", function(note)
  waiting = waiting or (note.event or {}).type == "auto_retry_start"
end)
util.on("sessionMoved", function(_, new)
  moved = new
end)
local uri
for _, s in ipairs(H.exec("pi.listSessions").sessions) do
  uri = uri or s.uri
end
H.exec("pi.prompt", { uri = uri, text = "Try it" })
H.wait(function()
  return waiting
end, "the retry's wait did not start")

-- Another program cuts the turn off the file: the server goes on in a new one.
local path = vim.uri_to_fname(uri)
local lines = vim.fn.readfile(path, "b")
vim.fn.writefile(vim.list_slice(lines, 1, #lines - 3), path, "b")
H.wait(function()
  return moved ~= nil
end, "the session did not move to a new file")

local cut = require("pi_lsp.chat").open(uri)
H.wait(function()
  return H.contains(cut.buf, "All green: 14 passed.")
end, "the chat of the cut file did not render", cut.buf)
H.check(not cut.busy and not H.contains(cut.buf, "retrying"), "the cut file's chat shows no turn", cut.buf)

local chat = require("pi_lsp.chat").open(moved)
H.wait(function()
  return H.contains(chat.buf, "All green: 14 passed.") and H.contains(chat.buf, "_↻ retrying (1/3) in ")
end, "the chat of the new file did not show the wait", chat.buf)
H.keys("<C-c>")
H.wait(function()
  return not chat.busy and H.contains(chat.buf, "**`⚠ Retry failed after 1 attempt: Retry cancelled`**")
end, "the cancelled wait did not end the turn", chat.buf)
H.finish()
