-- A follow-up and then a steer of the same text, each with its own line attached: pi delivers
-- the steer first, so the delivered "same" is the steer's. Its note goes; the follow-up keeps
-- its note, and an abort gives back the follow-up with its code (not the steer's).
-- Fake server: a reply held after word3 (until "steered"), the steered reply held after steer3
-- (until "aborted").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local f = assert(io.open("notes.py", "w"))
f:write("A = 1\nB = 2\n")
f:close()

local chat_buf, input_buf, uri = H.chat_streaming()
local chat = require("pi_lsp.chat").get(uri)
local UNDELIVERED = "pi-lsp: the turn ended before your queued message reached pi; it is back in the input"

--- Queue "same" with line `line` of notes.py attached, by `key`, shown as `note`.
local function queue(line, key, note)
  vim.cmd(("wincmd t | edit notes.py | %dPiSend"):format(line))
  H.wait(function()
    return #chat.context == 1
  end, "the line was not attached", chat_buf)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "same" })
  H.keys(key)
  H.wait(function()
    return H.contains(chat_buf, note) and #chat.context == 0
  end, "the message was not queued: " .. note, chat_buf)
end
queue(1, "F", "_↳ follow-up queued: same_")
queue(2, "S", "_↳ steering: same_")

H.release("steered")
H.wait(function()
  return H.contains(chat_buf, "steer3")
end, "the steered reply did not stream", chat_buf)
H.check(not H.contains(chat_buf, "_↳ steering: same_"), "the delivered steer's note is gone", chat_buf)
H.check(H.contains(chat_buf, "_↳ follow-up queued: same_"), "the queued follow-up keeps its note", chat_buf)
H.check(#chat.queued == 1 and chat.queued[1].delivery == "followUp",
  "the follow-up is what is still queued: " .. vim.inspect(chat.queued))

H.keys("<C-c>")
H.wait(function()
  return vim.tbl_contains(H.messages, UNDELIVERED) and not chat.busy
end, "the undelivered follow-up was not given back", chat_buf)
H.release("aborted")
H.check(H.text(input_buf) == "same", "the follow-up is back in the input", input_buf)
H.check(#chat.context == 1 and H.contains(chat_buf, "📎 `notes.py:1` goes with the next message"),
  "the follow-up's code (line 1) is attached again: " .. vim.inspect(chat.context), chat_buf)
H.finish()
