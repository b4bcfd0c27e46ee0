-- A steer's or follow-up's note under the transcript goes once its message reaches pi: the
-- message is then in the transcript, and the note showed its text a second time until the turn
-- ended. Fake server: a reply held after word3 (until "steered"), the steered reply, and the
-- follow-up's reply held after more3 (until "followed").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local chat_buf, input_buf, uri = H.chat_streaming()
local chat = require("pi_lsp.chat").get(uri)
local function queue(text, key, note)
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { text })
  H.keys(key)
  H.wait(function()
    return H.contains(chat_buf, note)
  end, "the message was not queued: " .. text, chat_buf)
end
queue("steer me", "S", "_↳ steering: steer me_")
queue("follow me", "F", "_↳ follow-up queued: follow me_")

--- How many times `text` is in the chat.
local function times(text)
  local _, count = H.text(chat_buf):gsub(vim.pesc(text), "")
  return count
end

H.release("steered")
-- Mid-turn: both messages were delivered and committed, the follow-up's reply streams.
H.wait(function()
  return H.contains(chat_buf, "more3") and H.text(chat_buf):find("## You[^\n]*\n\nfollow me") ~= nil
end, "the follow-up's reply did not stream", chat_buf)
H.check(chat.busy, "the turn still runs")
H.check(times("steer me") == 1 and times("follow me") == 1,
  "each delivered message shows once, its note gone", chat_buf)
H.check(not H.contains(chat_buf, "↳"), "no note of a queued message is left", chat_buf)
H.release("followed")
H.wait(function()
  return not chat.busy and H.contains(chat_buf, "more24")
end, "the turn did not end", chat_buf)
H.check(times("steer me") == 1 and times("follow me") == 1, "each message shows once after the turn", chat_buf)
H.check(H.text(input_buf) == "", "nothing is given back to the input", input_buf)
H.finish()
