-- Messages with code attached (an @mention): a steer whose file went with it is delivered,
-- not given back at the turn's end.
-- The fake server is scripted with: a reply of 8 pieces 0.3 s apart and
-- text_reply("Steered", " reply").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local f = assert(io.open("notes.py", "w"))
f:write("A = 2\n")
f:close()
table.insert(H.selects, function(items)
  return items[1] -- + Start a new session
end)
table.insert(H.inputs, "attached code")
vim.cmd("PiSessions")
local chat_buf, input_buf
H.wait(function()
  chat_buf, input_buf = H.find_buf("pi://chat/"), H.find_buf("pi://input/")
  return chat_buf and input_buf and H.contains(chat_buf, "# attached code")
end, "the chat opened")
local uri = vim.b[chat_buf].pi_lsp_uri
local chat = require("pi_lsp.chat").get(uri)
local UNDELIVERED = "pi-lsp: the turn ended before your queued message reached pi; it is back in the input"

-- A steer naming a file with @ reaches pi with the file (as a second text block): it is
-- not put back into the input when the turn ends.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Count slowly" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "piece1")
end, "the slow reply streams", chat_buf)
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Also look at @notes.py" })
H.keys("S")
H.wait(function()
  return H.contains(chat_buf, "↳ steering: Also look at @notes.py")
end, "the steer was queued", chat_buf)
-- (The turn's end gives back what it did not deliver in the same event that ends it.)
H.wait(function()
  return H.contains(chat_buf, "Steered reply") and not chat.busy
end, "the steered turn ended", chat_buf)
H.check(H.text(input_buf) == "", "the delivered steer was put back into the input", input_buf)
H.check(not vim.tbl_contains(H.messages, UNDELIVERED), "a delivered steer was called undelivered")

H.finish()
