-- With toolApproval = "ask": a follow-up's file outside the workspace, asked about while a
-- turn runs, is withdrawn when that turn is aborted (<C-c>): the question closes and the follow-up
-- stays in the input with its code, never to run, and once (queue_dropped names it too).
-- Fake server: a reply held after word3 (until "asked"). OUTSIDE_FILE: the file.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local client = require("pi_lsp.client")

-- The user answers later, as a person reading the question would.
local held = H.held_select()
-- How the question ended, as noted in the chat (the chat is redrawn from the session after
-- the turn, so the note itself does not stay).
local chats, outcome = require("pi_lsp.chat"), nil
local note_question = chats.note_question
chats.note_question = function(...)
  local noted = note_question(...)
  return function(answer)
    outcome = answer
    noted(answer)
  end
end

local dropped = false -- the aborted turn's queue_dropped, which names the follow-up
require("pi_lsp.util").on("turn", function(note)
  dropped = dropped or (note.event and note.event.type == "queue_dropped")
end)

local chat_buf, input_buf, uri = H.chat_streaming()

-- The follow-up, with the outside file's first line attached, sent from the chat.
vim.cmd("wincmd t | edit " .. vim.fn.fnameescape(os.getenv("OUTSIDE_FILE")) .. " | 1PiSend")
local chat = chats.get(uri)
H.wait(function()
  return #chat.context == 1
end, "the line was not attached", chat_buf)
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "FOLLOW-UP" })
H.keys("F")
H.wait(function()
  return held.on_choice ~= nil
end, "no approval question", chat_buf)

H.keys("<C-c>")
H.wait(function()
  return outcome == "no answer: the turn was aborted"
end, "the question stayed open", chat_buf)
H.release("asked")
H.wait(function()
  return vim.iter(H.messages):any(function(m)
    return m:find("aborted before your queued message reached pi", 1, true) ~= nil
  end)
end, "the user was not told the follow-up was dropped", chat_buf)
H.wait(function()
  return dropped and not chat.busy
end, "no queue_dropped after the abort", chat_buf)
H.check(vim.deep_equal(vim.api.nvim_buf_get_lines(input_buf, 0, -1, false), { "FOLLOW-UP" })
  and #chat.context == 1, "the follow-up did not stay to send again", chat_buf)
H.finish()
