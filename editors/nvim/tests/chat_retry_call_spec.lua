-- A reply that failed mid-call and was asked for again: its attempt, left out of the context,
-- reads the same during the wait as in the transcript read after the turn (the server's edit
-- mark). It named its call's path cut at 40 characters while pi waited, at 32 after the turn.
-- Fake server: a read of a long path, then an overloaded_error; then a reply.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chat = require("pi_lsp.chat")

local REMOVED = "## ~~assistant~~ removed from the context"

-- Every line the chat drew for the attempt, during the wait and after the turn.
local util = require("pi_lsp.util")
local set_lines, drawn = util.set_lines, {}
util.set_lines = function(buf, ...)
  set_lines(buf, ...)
  if vim.api.nvim_buf_get_name(buf):find("^pi://chat/") then
    for _, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
      if line:find("^_`%[error%]") then
        drawn[line] = true
      end
    end
  end
end

local chat_buf, _, uri = H.chat_send("Read it")
H.wait(function()
  return H.text(chat_buf):find(vim.pesc(REMOVED) .. " · %d+ tokens  `%x+`") ~= nil
    and H.contains(chat_buf, "after the retry") and not chat.get(uri).busy
end, "the retried turn did not end with its attempt read again", chat_buf)
local lines = vim.tbl_keys(drawn)
H.check(#lines == 1, "the attempt read one way, during the wait as after the turn: " .. table.concat(lines, " | "), chat_buf)
H.check(vim.endswith(lines[1] or "", " → read(/home/me/project/src/components…)`_"), "its call as the server names it", chat_buf)
H.finish()
