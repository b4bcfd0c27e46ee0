-- With toolApproval = "ask": a steer whose file outside the workspace is asked about, answered
-- (pi.prompt's `queued`) after its chat was wiped (:bwipeout) and opened again (:PiChat), goes
-- to the reopened chat: its input (a draft typed meanwhile) and keys stay its own, the steer is
-- queued there, and the next prompt is sent once the turn ends.
-- Fake server: a reply held after word3 (until "asked"), then "followed" and "third".
-- OUTSIDE_FILE: the file.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chats = require("pi_lsp.chat")
local client = require("pi_lsp.client")
local util = require("pi_lsp.util")
local held = H.held_select()

local ended = 0 -- agent_end events seen
util.on("turn", function(note)
  if note.event and note.event.type == "agent_end" then
    ended = ended + 1
  end
end)
local steers_answered = 0 -- pi.prompt answers to steers, once the chat has read them
local exec = client.exec
client.exec = function(method, args, callback, root)
  return exec(method, args, function(err, result)
    callback(err, result)
    if method == "pi.prompt" and args.delivery == "steer" then
      steers_answered = steers_answered + 1
    end
  end, root)
end

local chat_buf, input_buf, uri = H.chat_streaming()
local old = chats.get(uri)
vim.cmd("wincmd t | edit " .. vim.fn.fnameescape(os.getenv("OUTSIDE_FILE")) .. " | 1PiSend")
H.wait(function()
  return #old.context == 1
end, "the line was not attached", chat_buf)
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "STEER-X" })
H.keys("S")
H.wait(function()
  return held.on_choice ~= nil
end, "no approval question", chat_buf)

-- The chat goes and is opened again while the question is open; the user types a draft.
vim.cmd("bwipeout! " .. input_buf .. " " .. chat_buf)
vim.cmd("PiChat")
chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not open again")
input_buf = H.find_buf("pi://input/")
local chat = chats.get(uri)
H.check(chat and chat ~= old and chat.busy, "a new chat, on the running turn")
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "MY-DRAFT" })

-- The user allows the file: the steer is queued, and the wiped chat's pi.prompt answers.
held.on_choice(vim.iter(held.items):find(function(item)
  return item.decision == "allow"
end))
H.wait(function()
  return steers_answered == 1
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
