-- Editing the context: `dd` on a tool result in the :PiContext buffer removes
-- it (pi's context_edit), `u` there puts it back, `cc` in the chat replaces a
-- reply; the buffer, the chat and the statusline's token count follow.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local pi = require("pi_lsp")

local workspace = os.getenv("PI_LSP_WORKSPACE")
local example = vim.fn.glob(workspace .. "/.pi/sessions/*.jsonl")
local uri = vim.uri_from_fname(example)
local RESULT, REPLY = "145bca81", "456798a9" -- a tool result and a reply on the current branch

local function last_entry()
  local lines = vim.fn.readfile(example)
  return vim.json.decode(lines[#lines])
end

local function total()
  return H.exec("pi.previewContext", { uri = uri }).totalTokens
end

vim.cmd.edit(vim.fn.fnameescape(example))
vim.cmd("PiContext")
local preview
H.wait(function()
  preview = H.find_buf("pi://context/")
  return preview and H.contains(preview, "`" .. RESULT .. "`")
end, ":PiContext did not render")
local before = total()

-- `dd` in the body of the tool result (below its heading) removes it.
local heading = H.line_of(preview, "toolResult · 301 tokens · `" .. RESULT .. "`")
H.check(heading, "the tool result's heading", preview)
vim.api.nvim_set_current_win(vim.fn.bufwinid(preview))
vim.api.nvim_win_set_cursor(0, { heading + 2, 0 })
H.keys("dd")
H.wait(function()
  return H.contains(preview, "## ~~toolResult~~ · removed from the context · 301 → 0 tokens · `" .. RESULT .. "`")
end, "dd did not remove the tool result", preview)
local edit = last_entry()
H.check(edit.type == "context_edit" and edit.targetId == RESULT and edit.replacement == vim.NIL, "pi's edit was written: " .. vim.inspect(edit))
H.check(total() < before, "the total went down")
H.check(H.said("removed " .. RESULT .. " from the context"), "dd said what it did")
H.check(H.contains(preview, "Context edits: 1 removed"), "the header sums the edits", preview)
H.dump(":PiContext (after dd on a tool result)", preview)

-- `u` on the removed message puts it back (a later edit restores the original).
vim.api.nvim_win_set_cursor(0, { H.line_of(preview, "~~toolResult~~"), 0 })
H.keys("u")
H.wait(function()
  return H.contains(preview, "toolResult · 301 tokens · `" .. RESULT .. "`") and not H.contains(preview, "~~toolResult~~")
end, "u did not put the tool result back", preview)
H.check(last_entry().replacement.content[1].text:find("QUERY PLAN", 1, true), "the original content, restored")

-- `u` where nothing is edited: the server says so, nothing is written.
local size = vim.fn.getfsize(example)
vim.api.nvim_win_set_cursor(0, { H.line_of(preview, "`" .. RESULT .. "`"), 0 })
H.keys("u")
H.wait_said("has no context edit in force", true, "undo without an edit was not refused")
H.check(vim.fn.getfsize(example) == size, "nothing was written")

-- In the chat: `cc` on the reply replaces its content; the chat marks it and
-- the statusline's token count changes.
require("pi_lsp.chat").open(uri)
local chat = H.find_buf("pi://chat/")
H.wait(function()
  return H.contains(chat, "`" .. REPLY .. "`")
end, "the chat shows the reply", chat)
local tokens = pi.statusline()
vim.api.nvim_set_current_win(vim.fn.bufwinid(chat))
vim.api.nvim_win_set_cursor(0, { H.line_of(chat, "`" .. REPLY .. "`") + 1, 0 })
table.insert(H.inputs, "I added the test.")
H.keys("cc")
H.wait(function()
  return H.contains(chat, "✎ edited in context  `" .. REPLY .. "`") and H.contains(chat, "I added the test.")
end, "cc did not replace the reply in the chat", chat)
H.check(H.asked.default:find("^I'll add tests/test_orders%.py"), "the reply's text was offered for editing: " .. tostring(H.asked.default))
H.check(last_entry().replacement.content[1].text == "I added the test.", "the replacement was written as one text block")
H.wait(function()
  return pi.statusline() ~= tokens
end, "the statusline's token count did not change: " .. pi.statusline())

-- `dd` in the chat on the tool result's line, then it shows removed, in its place.
vim.api.nvim_win_set_cursor(0, { H.line_of(chat, "`" .. RESULT .. "`"), 0 })
H.keys("dd")
H.wait(function()
  return H.contains(chat, "## ~~toolResult~~ removed from the context · 301 tokens  `" .. RESULT .. "`")
end, "dd in the chat did not remove the tool result", chat)
H.dump(":PiChat (a reply replaced, a tool result removed)", chat)

-- `?` lists the keys.
H.keys("?")
H.check(H.messages[#H.messages]:find("dd remove from the context · cc replace in the context · u undo the context edit", 1, true), "? lists the edit keys: " .. H.messages[#H.messages])
H.finish()
