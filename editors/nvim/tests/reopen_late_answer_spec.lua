-- With toolApproval = "ask": a steer whose file outside the workspace is asked about, answered
-- (pi.prompt's `queued`) after its chat was wiped (:bwipeout) and opened again (:PiChat), goes
-- to the reopened chat: its input (a draft typed meanwhile) and keys stay its own, the steer is
-- queued there, and the next prompt is sent once the turn ends.
-- Fake server: a reply held after word3 (until "asked"), then "followed" and "third".
-- OUTSIDE_FILE: the file.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local util = require("pi_lsp.util")

local ended = 0 -- agent_end events seen
util.on("turn", function(note)
  if note.event and note.event.type == "agent_end" then
    ended = ended + 1
  end
end)

local steered = H.steer_asked_then_chat_reopened()
local held, old, chat = steered.held, steered.old, steered.chat
local chat_buf, input_buf = steered.chat_buf, steered.input_buf

-- The user allows the file: the steer is queued, and the wiped chat's pi.prompt answers.
held.on_choice(vim.iter(held.items):find(function(item)
  return item.decision == "allow"
end))
H.wait(function()
  return steered.steers_answered() == 1
end, "the steer was not answered", chat_buf)
H.check(vim.deep_equal(H.lines(input_buf), { "MY-DRAFT" }),
  "the reopened chat's draft stays: " .. vim.inspect(H.lines(input_buf)), chat_buf)
H.check(#chat.queued == 1 and chat.queued[1].text == "STEER-X" and #old.queued == 0,
  "the steer is queued in the reopened chat", chat_buf)
H.wait(function()
  return H.contains(chat_buf, "steering: STEER-X")
end, "the reopened chat does not show the queued steer", chat_buf)

-- The steer reaches the model; the turn ends, and the draft is sent as the next prompt.
H.release("asked")
H.wait(function()
  return ended == 1 and not chat.busy
end, "the turn did not end", chat_buf)
H.check(#chat.queued == 0 and not H.contains(chat_buf, "steering: STEER-X"),
  "the delivered steer's note went", chat_buf)
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
H.keys("<CR>")
H.check(not vim.iter(H.messages):any(function(m)
  return m:find("pi is busy", 1, true) ~= nil
end), "the prompt was refused: " .. table.concat(H.messages, " | "))
H.wait(function()
  return ended == 2 and H.contains(chat_buf, "third")
end, "the next prompt did not run", chat_buf)
H.check(H.contains(chat_buf, "MY-DRAFT") and vim.deep_equal(H.lines(input_buf), { "" }),
  "the draft was sent from the reopened chat's input", chat_buf)
H.finish()
