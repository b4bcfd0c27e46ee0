-- A steer queued in a chat that is then wiped (:bwipeout) and opened again (:PiChat) comes back
-- into the new chat's input when an abort leaves it unsent: the server's queue_dropped names it,
-- and the new chat never queued it. A chat that gave its own steer back at the turn's end does
-- not give it back a second time from queue_dropped.
-- Fake server: replies held after their fourth piece (until "first", then "second").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chats = require("pi_lsp.chat")
local util = require("pi_lsp.util")

local dropped = 0 -- queue_dropped events seen
util.on("turn", function(note)
  if note.event and note.event.type == "queue_dropped" then
    dropped = dropped + 1
  end
end)

--- Queue `text` as a steer from the input of `chat`.
local function steer(chat, input_buf, text)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { text })
  H.keys("S")
  H.wait(function()
    return #chat.queued == 1
  end, "the steer was not queued: " .. text, chat.buf)
end

--- Abort from the input of `chat`, and wait for its turn's queue_dropped (the `count`th).
local function abort(chat, input_buf, count)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  H.keys("<C-c>")
  H.wait(function()
    return dropped == count and not chat.busy
  end, "no queue_dropped after the abort", chat.buf)
end

local chat_buf, input_buf, uri = H.chat_streaming()
local first = chats.get(uri)
steer(first, input_buf, "STEER-ONE")

-- The chat goes with its state; opened again, it is a new chat on the same session.
vim.cmd("bwipeout! " .. input_buf .. " " .. chat_buf)
vim.cmd("PiChat")
chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not open again")
input_buf = H.find_buf("pi://input/")
local chat = chats.get(uri)
H.check(chat and chat ~= first and chat.busy, "a new chat, on the running turn")
abort(chat, input_buf, 1)
H.release("first")
H.check(vim.deep_equal(H.lines(input_buf), { "STEER-ONE" }),
  "the steer the abort left unsent is back in the reopened chat's input: " .. vim.inspect(H.lines(input_buf)), chat_buf)
H.check(H.said("the turn ended before your queued message reached pi; it is back in the input"),
  "the user is told: " .. table.concat(H.messages, " | "))

-- The chat's own steer comes back once: at its turn's end, not again from queue_dropped.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "again" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "more3")
end, "the second turn did not stream", chat_buf)
steer(chat, input_buf, "STEER-TWO")
abort(chat, input_buf, 2)
H.release("second")
H.check(vim.deep_equal(H.lines(input_buf), { "STEER-TWO" }),
  "the steer comes back once: " .. vim.inspect(H.lines(input_buf)), chat_buf)
H.finish()
