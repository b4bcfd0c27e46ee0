-- With toolApproval = "ask": a follow-up's file outside the workspace, asked about while a
-- turn runs (turnId = that turn), stays asked when the turn ends; allowed, it runs as a turn.
-- Fake server: a reply held after word3 (until "asked"), then the follow-up's. OUTSIDE_FILE: the file to attach.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local client = require("pi_lsp.client")
local util = require("pi_lsp.util")

-- The user answers later, as a person reading the question would.
local held = H.held_select()

local chat_buf, input_buf, uri = H.chat_streaming()

local ended = false
util.on("turn", function(note)
  ended = ended or (note.event and note.event.type == "agent_end")
end)
local answered, failure, result = false, nil, nil
client.exec("pi.prompt", {
  uri = uri,
  text = "FOLLOW-UP",
  delivery = "followUp",
  context = { { uri = vim.uri_from_fname(os.getenv("OUTSIDE_FILE")) } },
}, function(err, res)
  answered, failure, result = true, err, res
end)
H.wait(function()
  return held.on_choice ~= nil
end, "no approval question", chat_buf)
H.release("asked")
-- The turn ends with the question open: every turn listener has heard its agent_end.
H.wait(function()
  return ended
end, "the turn did not end", chat_buf)

held.on_choice(vim.iter(held.items):find(function(item)
  return item.decision == "allow"
end))
H.wait(function()
  return answered
end, "the follow-up was not answered", chat_buf)
H.check(failure == nil and result.turnId ~= nil, "the follow-up did not start a turn: "
  .. vim.inspect(failure or result), chat_buf)
H.wait(function()
  return H.contains(chat_buf, "followed")
end, "the follow-up's reply did not show", chat_buf)
H.finish()
