-- What a session file wrote with bidi controls, line and paragraph separators or C1 controls
-- (PI_LSP_BIDI: an entry id holding U+202E, a label holding U+2029 and U+009B, a model holding
-- U+2028, a custom type holding U+0085, a custom entry id holding U+2066) is drawn with a space
-- for each, as VS Code's oneLine and the server's previews do: in the tree, the chat, and `R`'s
-- diff buffer and notification (a path holding them too).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

-- U+202E, U+2028, U+2029, U+2066, U+0085, U+009B in UTF-8.
local UNSAFE = { "\226\128\174", "\226\128\168", "\226\128\169", "\226\129\166", "\194\133", "\194\155" }
local function unsafe_in(text)
  for _, char in ipairs(UNSAFE) do
    if text:find(char, 1, true) then
      return true
    end
  end
  return false
end
local function check_lines(buf, what)
  for _, line in ipairs(H.lines(buf)) do
    H.check(not unsafe_in(line), what .. " draws a bidi, separator or C1 control: " .. vim.inspect(line), buf)
  end
end

local file = os.getenv("PI_LSP_BIDI")
vim.cmd("PiChat " .. vim.fn.fnameescape(file))
local chat = H.wait_buf("pi://chat/bidi", "All done", "the chat did not render")
H.check(vim.tbl_contains(H.lines(chat), "## pi · `m x`  `a 1`"), "the model and id on one line, spaces for both", chat)
H.check(vim.tbl_contains(H.lines(chat), "## `no te`  `c 1`"), "the custom type and id, spaces for both", chat)
check_lines(chat, "the chat")

vim.cmd("only")
vim.cmd("PiTree " .. vim.fn.fnameescape(file))
local tree = H.wait_buf("pi://tree/bidi", "← leaf", "the tree did not draw")
H.check(H.line_of(tree, " a 1 assistant: "), "the id's U+202E is a space", tree)
H.check(H.line_of(tree, "[lab el x]"), "the label's U+2029 and U+009B are spaces", tree)
check_lines(tree, "the tree")

-- `R` on the reply: a crafted session has no snapshots, so the server's answer is made up here.
local client = require("pi_lsp.client")
local run = client.run
client.run = function(command, args, on_result, root)
  if command ~= "pi.fileChanges" then
    return run(command, args, on_result, root)
  end
  on_result({ available = true, skipped = { "p\226\128\174q\226\128\168r\194\133s.txt" } })
end
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.line_of(tree, " a 1 assistant: "), 0 })
H.keys("R")
client.run = run
H.wait_said("nothing to restore to entry a 1; 1 file(s) left alone, listed in the diff", true,
  "R did not say, on one line, what it leaves alone")
for _, message in ipairs(H.messages) do
  H.check(not unsafe_in(message), "a notification holds a bidi, separator or C1 control: " .. vim.inspect(message))
end
local diff = H.find_buf("pi://files/a 1")
H.check(diff and H.lines(diff)[1] == "left alone (ignored, unreadable, or too large to snapshot): p q r s.txt",
  "the path's controls are spaces", diff)
for _, buf in ipairs(vim.api.nvim_list_bufs()) do
  H.check(not unsafe_in(vim.api.nvim_buf_get_name(buf)), "a buffer's name: " .. vim.api.nvim_buf_get_name(buf))
end

H.finish()
