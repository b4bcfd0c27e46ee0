-- An abort gives queued steers and follow-ups back to the input in pi 1.6's order
-- (restoreQueuedMessagesToEditor): every steer, then every follow-up, each in the order sent,
-- then what was being written; their code comes back in the same order.
-- Fake server: a reply held after word3 (until "aborted").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local editor = require("pi_lsp.editor")

local chat_buf, input_buf, uri = H.chat_streaming()
local chat = require("pi_lsp.chat").get(uri)

--- Queue `text` (with the first line of the file `name` attached) by `key` (S or F).
local function queue(text, key, name)
  local f = assert(io.open(name, "w"))
  f:write(name .. " = 1\n")
  f:close()
  vim.cmd("wincmd t | edit " .. name)
  require("pi_lsp.chat").attach(uri, editor.selection(0, 1, 1))
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { text })
  local before = #chat.queued
  H.keys(key)
  H.wait(function()
    return #chat.queued == before + 1 and #chat.context == 0
  end, "the message was not queued: " .. text, chat_buf)
end

queue("FOLLOW-ONE", "F", "follow_one.py")
queue("STEER-ONE", "S", "steer_one.py")
queue("FOLLOW-TWO", "F", "follow_two.py")
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "DRAFT" })
H.keys("<C-c>")
H.wait(function()
  return not chat.busy and H.text(input_buf) ~= "DRAFT"
end, "the queued messages did not come back", chat_buf)
H.release("aborted")
H.check(vim.deep_equal(H.lines(input_buf), { "STEER-ONE", "", "FOLLOW-ONE", "", "FOLLOW-TWO", "", "DRAFT" }),
  "steers first, then follow-ups, then the draft: " .. vim.inspect(H.lines(input_buf)), chat_buf)
local labels = vim.tbl_map(function(item)
  return item.label
end, chat.context)
H.check(vim.deep_equal(labels, { "steer_one.py:1", "follow_one.py:1", "follow_two.py:1" }),
  "their code in the same order: " .. vim.inspect(labels), chat_buf)
H.finish()
