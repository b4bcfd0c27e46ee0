-- Messages with code attached (an @mention, :PiSend): a steer whose file went with it is
-- delivered, not given back at the turn's end; a prompt that fails before its turn and a
-- steer an abort leaves undelivered come back with their code.
-- The fake server is scripted with: a reply of 8 pieces held after piece1 (until "steered"),
-- text_reply("Steered", " reply"), text_reply("Hello"), a reply of 60 pieces held after piece1
-- (until "aborted"; aborted) and text_reply("Again").
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
H.release("steered")
-- (The turn's end gives back what it did not deliver in the same event that ends it.)
H.wait(function()
  return H.contains(chat_buf, "Steered reply") and not chat.busy
end, "the steered turn ended", chat_buf)
H.check(H.text(input_buf) == "", "the delivered steer was put back into the input", input_buf)
H.check(not vim.tbl_contains(H.messages, UNDELIVERED), "a delivered steer was called undelivered")

-- Code sent with :PiSend goes with the next prompt; when that prompt fails before its turn
-- starts (its provider has no API key), the code comes back with the prompt's text.
local function attach_line()
  vim.cmd("wincmd t | edit notes.py | 1PiSend")
  H.wait(function()
    return #chat.context == 1 and H.contains(chat_buf, "📎 `notes.py:1` goes with the next message")
  end, "the line was attached", chat_buf)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
end
attach_line()
H.exec("pi.setModel", { uri = uri, provider = "openai", modelId = "gpt-4.1" })
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Explain this line" })
H.keys("<CR>")
H.wait(function()
  return H.said("your prompt did not reach pi; it is back in the input")
end, "the failed prompt was given back", chat_buf)
H.check(H.text(input_buf) == "Explain this line", "the prompt is back in the input", input_buf)
H.check(#chat.context == 1 and H.contains(chat_buf, "📎 `notes.py:1` goes with the next message"),
  "its code is attached again: " .. vim.inspect(chat.context), chat_buf)
H.exec("pi.setModel", { uri = uri, provider = "anthropic", modelId = "claude-sonnet-4-5" })
H.keys("<CR>") -- sent again, with its code (tests/test_nvim.py reads the request)
H.wait(function()
  return H.contains(chat_buf, "Hello") and not chat.busy
end, "the reply", chat_buf)
H.check(#chat.context == 0 and not H.contains(chat_buf, "goes with the next message"), "the code went with it", chat_buf)

-- A steer with code attached that the turn ends without (an abort) comes back with its code.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Count again" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "piece1") and chat.busy
end, "the second slow reply streams", chat_buf)
attach_line()
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Faster, with this" })
H.keys("S")
H.wait(function()
  return H.contains(chat_buf, "↳ steering: Faster, with this") and not H.contains(chat_buf, "goes with the next message")
end, "the steer was queued with its code", chat_buf)
H.keys("<C-c>")
H.wait(function()
  return vim.tbl_contains(H.messages, UNDELIVERED) and not chat.busy
end, "the undelivered steer was given back", chat_buf)
H.release("aborted")
H.check(H.text(input_buf) == "Faster, with this", "the steer is back in the input", input_buf)
H.check(#chat.context == 1 and H.contains(chat_buf, "📎 `notes.py:1` goes with the next message"),
  "its code is attached again: " .. vim.inspect(chat.context), chat_buf)
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "Again") and not chat.busy
end, "the given-back steer was sent as a prompt", chat_buf)


-- A file's name is no Markdown: its note reads as written (Markdown's conceal applied).
local odd = "[x](y)*a*_b_.py"
vim.fn.writefile({ "x = 1" }, odd)
vim.cmd("wincmd t | edit " .. vim.fn.fnameescape(odd) .. " | 1PiSend")
local note = "📎 " .. odd .. ":1 goes with the next message"
H.wait(function()
  local row = H.line_of(chat_buf, "goes with the next message")
  return row and H.shown(chat_buf, row):find(note, 1, true) ~= nil
end, "the attachment's name reads as written: " .. note, chat_buf)

H.finish()
