-- A server stopped while a prompt's turn had not been seen to start: the prompt goes back to
-- the input only when the session file does not hold it. Here the server wrote it (a clean
-- stop writes it aborted) but its turn's events never reached the chat.
-- Workspace: the example session with a nearly full window, so a prompt compacts first;
-- the fake server's summary is held (until "summary").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local util = require("pi_lsp.util")
local TEXT = "written before the stop"

local chat_buf, input_buf, uri = H.chat_send(TEXT)
local chat = require("pi_lsp.chat").get(uri)
H.wait(function()
  return chat.pending ~= nil and H.contains(chat_buf, "compacting the context")
end, "the prompt's compaction did not start", chat_buf)

-- The stopping server's events of the turn (its agent_start, the prompt's message_end) are lost.
local emit = util.emit
util.emit = function(event, ...)
  if event ~= "turn" then
    return emit(event, ...)
  end
end
local stopped = false
util.on("stopped", function()
  stopped = true
end)
require("pi_lsp.client").stop_all()
H.wait(function()
  return stopped and not chat.busy
end, "the chat still waits for a server that stopped", chat_buf)
util.emit = emit
H.release("summary")

local file = assert(io.open(vim.uri_to_fname(uri), "rb"))
local written = file:read("*a"):find(TEXT, 1, true) ~= nil
file:close()
H.check(written, "the stopping server wrote the prompt")
H.check(H.text(input_buf) == "", "the prompt written to the session is not also back in the input", input_buf)
H.check(not H.said("your prompt did not reach pi; it is back in the input"), "nor said to be: " .. table.concat(H.messages, " | "))
H.finish()
