-- With toolApproval = "ask": a steer whose file outside the workspace is asked about, withdrawn
-- by an abort from the chat opened again (:PiChat) after the one it was sent from was wiped
-- (:bwipeout): pi.prompt's `dropped` answer gives the steer back to the reopened chat, text
-- and code, before the draft typed there, and once (queue_dropped names it too).
-- MOVE_SESSION=1: another program cuts the file short in between, so the session moves to a
-- new file; the steer still comes back there, and a chat on the cut file gets nothing.
-- Fake server: a reply held after word3 (until "asked"). OUTSIDE_FILE: the file.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chats = require("pi_lsp.chat")
local util = require("pi_lsp.util")

local dropped = false -- the aborted turn's queue_dropped, which names the steer
util.on("turn", function(note)
  dropped = dropped or (note.event and note.event.type == "queue_dropped")
end)

local steered = H.steer_asked_then_chat_reopened()
local chat, uri = steered.chat, steered.uri
local chat_buf, input_buf = steered.chat_buf, steered.input_buf

local cut -- MOVE_SESSION: the chat on the file cut short, a session of its own
if os.getenv("MOVE_SESSION") == "1" then
  local moved
  util.on("sessionMoved", function(_, new)
    moved = new
  end)
  H.cut_last_line(uri)
  H.wait(function()
    return moved ~= nil
  end, "the session did not move", chat_buf)
  H.check(chats.get(moved) == chat, "the reopened chat followed the move", chat_buf)
  cut = chats.open(uri)
  H.wait(function()
    return H.contains(cut.buf, "All green: 14 passed.")
  end, "cut chat", cut.buf)
  vim.cmd("wincmd t")
  if vim.fn.bufwinid(input_buf) == -1 then
    vim.cmd("PiChat")
  end
end

vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
H.keys("<C-c>")
H.release("asked")
H.wait(function()
  return steered.steers_answered() == 1 and dropped and not chat.busy
end, "no `dropped` answer and queue_dropped after the abort", chat_buf)
H.check(vim.deep_equal(H.lines(input_buf), { "STEER-X", "", "MY-DRAFT" }),
  "the steer is back once, before the draft: " .. vim.inspect(H.lines(input_buf)), chat_buf)
H.check(#chat.context == 1, "its code goes with the next message: " .. vim.inspect(chat.context), chat_buf)
if cut then
  local cut_input = vim.api.nvim_buf_get_lines(cut.input, 0, -1, false)
  H.check(vim.deep_equal(cut_input, { "" }) and #cut.context == 0,
    "the cut file's chat is left alone: " .. vim.inspect(cut_input), chat_buf)
end
H.finish()
