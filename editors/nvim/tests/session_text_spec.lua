-- What a session file or a tool wrote, shown as it may be (PI_LSP_ODD: a session whose tool
-- call and result hold NUL, labels whose id or text does, names and ids holding line breaks, a
-- name holding NUL, a tool name holding a line break): the chat, its busy line, :PiCheck, the
-- tree, its restore and :PiRename show it, each on one line.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

-- vim.fn takes a string holding NUL for a Blob: the summaries hold a space instead.
vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_ODD")))
local chat_buf = H.wait_buf("pi://chat/odd", "All done", "the chat of NUL text did not render")
H.check(H.contains(chat_buf, "**`→ bash(printf 'a b')`**"), "the command's NUL is a space", chat_buf)
H.check(H.contains(chat_buf, "**`→ read(x y.py)`**"), "the path's NUL is a space", chat_buf)
H.check(H.contains(chat_buf, "▸ `✓ bash: a b`  `t1`"), "the result's NUL is a space", chat_buf)
H.check(not vim.bo[chat_buf].modifiable, "the chat is read-only", chat_buf)
-- Names and ids a session wrote with line breaks stay on their line.
for _, line in ipairs({ "## pi · `evil model`  `a 3`", "▸ **`→ to ol()`**", "_`(error: bad thing)`_", "▸ `✓ to ol: ok`  `t3`", "## `no te`  `c 1`" }) do
  H.check(vim.tbl_contains(H.lines(chat_buf), line), "a line of its own: " .. line, chat_buf)
end

-- :PiCheck lists a problem of an entry whose id holds NUL.
vim.cmd("PiCheck " .. vim.fn.fnameescape(os.getenv("PI_LSP_ODD")))
H.wait(function()
  return #vim.fn.getqflist() > 0
end, "the check's problems were not listed")
local texts = vim.tbl_map(function(item)
  return item.text
end, vim.fn.getqflist())
H.check(texts[1]:find("dangling-reference [l x]", 1, true), "the id's NUL is a space: " .. vim.inspect(texts))

-- The tree measures rows longer than its window: an id or label holding NUL has a space.
vim.cmd("only")
vim.cmd("PiTree " .. vim.fn.fnameescape(os.getenv("PI_LSP_ODD")))
local tree_buf = H.wait_buf("pi://tree/odd", "← leaf", "the tree of NUL ids and labels did not draw")
H.check(H.lines(tree_buf)[H.line_of(tree_buf, " u1 user: ")]:find("[x y long long", 1, true), "the label's NUL is a space", tree_buf)
H.check(H.line_of(tree_buf, "* l x label: "), "the id's NUL is a space", tree_buf)

-- `l` asks through vim.ui.input, whose default one hands both texts to vim.fn.input.
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree_buf))
for _, row in ipairs({ " u1 user: ", "* l x label: " }) do
  vim.api.nvim_win_set_cursor(0, { H.line_of(tree_buf, row), 0 })
  table.insert(H.inputs, false)
  H.keys("l")
  H.check(not (H.asked.prompt .. H.asked.default):find("%z"), "no NUL in the question: " .. vim.inspect(H.asked))
end

-- `R` shows the diff, then asks through vim.ui.select, whose default one hands the prompt to
-- vim.fn.inputlist. A crafted session has no snapshots: the server's answer is made up here.
local client = require("pi_lsp.client")
local run = client.run
client.run = function(command, args, on_result, root)
  if command ~= "pi.fileChanges" then
    return run(command, args, on_result, root)
  end
  on_result({ available = true, files = { { status = "deleted", path = "line\nbreak.txt", diff = "" } } })
end
local asked
table.insert(H.selects, function(items, opts)
  asked = opts.prompt
  return items[2]
end)
vim.api.nvim_win_set_cursor(0, { H.line_of(tree_buf, "* l x label: "), 0 })
H.keys("R")
client.run = run
H.check(#H.selects == 0 and not asked:find("%c"), "the restore's question is one line: " .. vim.inspect(asked))
local diff = H.find_buf("pi://files/l x")
H.check(diff and H.contains(diff, "deleted: line break.txt"), "the path's line break is a space", diff)

-- :PiRename offers the name as it is shown: one line, no NUL (vim.fn.input's default).
table.insert(H.inputs, false)
vim.cmd("PiRename")
H.wait(function()
  return #H.inputs == 0
end, ":PiRename did not ask")
H.check(H.asked.default == "odd name", "the name offered: " .. vim.inspect(H.asked))

-- The busy line names the running tool as the model wrote it (the fake calls "to\nol"). The
-- line lasts as long as the call: every line the chat draws is kept.
local busy_uri = H.exec("pi.newSession", { name = "busy" }).uri
require("pi_lsp.chat").open(busy_uri)
local busy_name = "pi://chat/" .. vim.fn.fnamemodify(vim.uri_to_fname(busy_uri), ":t:r")
local busy_buf = H.find_buf(busy_name)
local drawn = {}
vim.api.nvim_buf_attach(busy_buf, false, {
  on_lines = function(_, buf, _, first, _, last)
    vim.list_extend(drawn, vim.api.nvim_buf_get_lines(buf, first, last, false))
  end,
})
H.exec("pi.prompt", { uri = busy_uri, text = "run it" })
H.wait_buf(busy_name, "Ran it", "the turn did not end")
H.check(vim.iter(drawn):find(function(line)
  return line:find("pi is running to ol…", 1, true)
end), "the tool's name on the busy line: " .. vim.inspect(drawn))

H.finish()
