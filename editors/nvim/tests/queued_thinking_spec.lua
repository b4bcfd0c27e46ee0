-- :PiThinking while a turn runs is written at its end, clamped to the model then in force
-- (a :PiModel queued before it may change that): said so, with no level promised. Fake
-- server: a reply held after word3 (until "queued").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local session = require("pi_lsp.session")

local chat, _, uri = H.chat_streaming()
vim.cmd("PiThinking max")
H.wait(function()
  return H.said(("thinking level of %s: max from when the running turn ends, or the nearest the model then in force offers")
    :format(vim.fn.fnamemodify(vim.uri_to_fname(uri), ":t")))
end, "the queued level was not said to wait for the model at the turn's end", chat)
H.check(session.busy(uri), "the turn still runs")
H.release("queued")
H.finish()
