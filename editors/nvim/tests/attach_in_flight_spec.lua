-- Code attached while pi.prompt is being answered is not the prompt's: it stays attached for
-- the next message, and the code sent with the prompt goes. The server's answer is held until
-- the code is attached, as a slow answer would be.
-- Fake server: text_reply("First"), text_reply("Second").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local client = require("pi_lsp.client")
local chats = require("pi_lsp.chat")
local editor = require("pi_lsp.editor")

--- The line of the file `name`, as :PiSend attaches it.
local function line_of(name)
  local f = assert(io.open(name, "w"))
  f:write(name:gsub("%.py$", "") .. " = 1\n")
  f:close()
  local buf = vim.fn.bufadd(name)
  vim.fn.bufload(buf)
  return editor.selection(buf, 1, 1)
end

local exec, answer = client.exec, nil
client.exec = function(method, args, callback, root)
  if method ~= "pi.prompt" then
    return exec(method, args, callback, root)
  end
  return exec(method, args, function(err, result)
    answer = function()
      callback(err, result)
    end
  end, root)
end

vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local input_buf = H.find_buf("pi://input/")
local uri = require("pi_lsp.session").last_uri
local chat = chats.get(uri)
chats.attach(uri, line_of("sent.py"))
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "With the first" })
H.keys("<CR>")
H.wait(function()
  return answer ~= nil
end, "pi.prompt was not answered", chat_buf)
chats.attach(uri, line_of("later.py"))
answer()
client.exec = exec
H.wait(function()
  return H.contains(chat_buf, "First") and not chat.busy
end, "the turn did not end", chat_buf)
local labels = vim.tbl_map(function(item)
  return item.label
end, chat.context)
H.check(vim.deep_equal(labels, { "later.py:1" }), "the code attached meanwhile stays, the sent goes: " .. vim.inspect(labels), chat_buf)
H.check(H.contains(chat_buf, "📎 `later.py:1` goes with the next message"), "and is shown so", chat_buf)
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "With the second" })
H.keys("<CR>") -- tests/test_nvim.py reads what each request carried
H.wait(function()
  return H.contains(chat_buf, "Second") and not chat.busy
end, "the second turn did not end", chat_buf)
H.check(#chat.context == 0, "sent with the second", chat_buf)
H.finish()
