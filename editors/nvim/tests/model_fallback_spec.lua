-- A session left on a model pi-lsp's catalog lacks (anthropic/claude-nope-9, appended by
-- tests/test_nvim.py) runs its turn on the default model, and the user is warned, once.
-- Fake server: text_reply("On the default").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local pi = require("pi_lsp")

local chat_buf = H.chat_send("go on")
H.wait(function()
  return not pi.statusline():find("busy", 1, true) and H.text(chat_buf):find("## pi · claude%-sonnet%-4%-5  `%x+`\n\nOn the default")
end, "the turn did not end with the reply on the default model", chat_buf)
local warning = "pi-lsp: could not restore model anthropic/claude-nope-9; using anthropic/claude-sonnet-4-5"
local told = vim.tbl_filter(function(message)
  return message == warning
end, H.messages)
H.check(#told == 1, "warned once: " .. table.concat(H.messages, " | "))
H.finish()
