-- A reply the provider refused as too long, and pi left out of the context (nothing could be
-- compacted, so it did not ask again): once the turn is over and the chat has read its
-- transcript again, the reply's error shows whole, not cut at a line's width ("prompt is too …").
-- Fake server: a 400 "prompt is too long: 250000 tokens > 200000 maximum".
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chat = require("pi_lsp.chat")

local REMOVED = "## ~~assistant~~ removed from the context"
local ERROR = "_`[error] Anthropic 400 invalid_request_error: prompt is too long: 250000 tokens > 200000 maximum`_"

local chat_buf, _, uri = H.chat_send("p400")
H.wait(function()
  return H.text(chat_buf):find(vim.pesc(REMOVED) .. " · %d+ tokens  `%x+`") ~= nil and not chat.get(uri).busy
end, "the turn did not end with its reply left out", chat_buf)
H.check(H.contains(chat_buf, ERROR), "the reply's error, whole", chat_buf)
H.dump(":PiChat (a failed reply left out)", chat_buf, 6)
H.finish()
