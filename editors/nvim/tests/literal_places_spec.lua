-- A text that is not Markdown shows as written in the chat (conceallevel=2): PI_LSP_PLACE
-- names the place ("removed": a removed message's preview; "model": a reply's model name in
-- its heading; "custom": a custom message's type in its heading; "plan": the compaction plan's
-- first kept entry and paths).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.prepare()
local render = require("pi_lsp.render")
local TEXT = "m*o*d[e](l) `x` _a_"
local b = render.builder()
local place = os.getenv("PI_LSP_PLACE")
if place == "plan" then
  b.lines = require("pi_lsp.context").plan_lines({ tokensBefore = 1, messagesToSummarize = 1,
    firstKeptEntryId = TEXT, readFiles = { TEXT }, modifiedFiles = { TEXT } })
elseif place == "removed" then
  b:removed({ role = "toolResult", targetId = "t1", tokensBefore = 3, original = TEXT })
elseif place == "model" then
  b:message({ role = "assistant", model = TEXT, content = { { type = "text", text = "hi" } } }, "a1")
else
  b:message({ role = "custom", customType = TEXT, content = "hi" }, "c1")
end
local buf = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(buf, 0, -1, false, b.lines)
vim.treesitter.start(buf, "markdown")
local shown = {}
for lnum = 1, #b.lines do
  shown[#shown + 1] = H.shown(buf, lnum)
end
local _, count = table.concat(shown, "\n"):gsub(vim.pesc(TEXT), "")
H.check(count == (place == "plan" and 3 or 1), place .. " shows as written: " .. vim.inspect(shown))
