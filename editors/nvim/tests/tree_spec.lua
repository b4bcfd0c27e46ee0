-- :PiTree on the example session: entries, leaf mark, labels, folds; branch,
-- label, preview and diff from the tree's keys; :PiContext.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

vim.cmd("PiTree")
local buf = H.wait_buf("pi://tree/", "← leaf", "the tree buffer did not render")

-- Entries, the current path, the leaf and labels are shown.
H.check(H.contains(buf, "Fix slow order listing — 56 entries, leaf 8fb6dff7"), "header names the session and leaf", buf)
H.check(H.contains(buf, "[tests-green]"), "label tests-green shown", buf)
local leaf_line = H.lines(buf)[H.line_of(buf, "← leaf")]
H.check(leaf_line:find("8fb6dff7", 1, true) and leaf_line:find("*", 1, true), "the leaf line is on the path: " .. leaf_line)
H.check(H.lines(buf)[2]:find('^" <CR> branch · s summary · .*%? keys$'), "a help line is shown", buf)
H.check(vim.api.nvim_get_current_buf() == buf, "the tree window is current")
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.line_of(buf, "← leaf"), "the cursor starts on the leaf")
-- The abandoned ORM branch is folded, the path is not; the server sent the branch's first row
-- and its count, and opening the fold fetches its rows.
local orm_start = H.entry(buf, "e1afef94")
H.check(vim.fn.foldclosed(orm_start) == orm_start, "the off-path branch is folded")
H.check(vim.fn.foldclosed(H.entry(buf, "904e4bce")) == -1, "the current path is not folded")
H.check(H.entry(buf, "28511eec") == nil and H.lines(buf)[orm_start + 1] == "    … 13 more rows",
  "the folded branch's rows are not fetched yet", buf)
vim.api.nvim_win_set_cursor(0, { orm_start, 0 })
H.keys("zo")
H.wait(function()
  return H.entry(buf, "28511eec") ~= nil
end, "opening the fold did not fetch its rows", buf)
H.check(not H.contains(buf, "more rows") and vim.fn.foldclosed(orm_start) == -1, "all 13 rows, the fold open", buf)
vim.cmd("normal! zc")
H.check(H.contains(buf, "[orm-dead-end]"), "label orm-dead-end shown", buf)
local dead_end = H.lines(buf)[H.entry(buf, "28511eec")]
H.check(not dead_end:find("* 28511eec", 1, true), "the dead end is off the path: " .. dead_end)

-- Lines fit the window: the preview is shortened, never the id, label or leaf mark.
local function fits(width)
  for lnum, line in ipairs(H.lines(buf)) do
    if lnum > 2 and vim.fn.strdisplaywidth(line) > width then
      return false, line
    end
  end
  return true
end
local win = vim.fn.bufwinid(buf)
-- A UI sends WinResized after a resize; headless nvim never redraws, so send it here.
local function resize(width)
  vim.api.nvim_win_set_width(win, width)
  vim.api.nvim_exec_autocmds("WinResized", {})
end
local function dead_end_line()
  return H.lines(buf)[H.entry(buf, "28511eec")]
end
--- The text of every closed fold, as the window shows it.
local function closed_folds()
  local out = {}
  for lnum = 1, vim.api.nvim_buf_line_count(buf) do
    if vim.fn.foldclosed(lnum) == lnum then
      out[#out + 1] = vim.fn.foldtextresult(lnum)
    end
  end
  return out
end
-- Given the room (headless Neovim is never wider than 80 columns), the hint line has every key.
local hint = require("pi_lsp.tree").help_line(140)
H.check(hint:find("R restore · U undo · c chat · r refresh · q close · %? keys$") and vim.fn.strdisplaywidth(hint) <= 140,
  "every key is in the hint line: " .. hint)
resize(79)
H.wait(function()
  return fits(79) and dead_end_line():find("assistant: %S.*  %[orm%-dead%-end%]$") ~= nil
end, "the tree was not laid out again for 79 columns", buf)
H.check(vim.fn.foldclosed(H.entry(buf, "e1afef94")) == H.entry(buf, "e1afef94"), "folds stay closed")
-- The hint line fits as well, and always ends with `?`, which lists every key.
H.check(vim.fn.strdisplaywidth(H.lines(buf)[2]) <= 79 and H.lines(buf)[2]:find(" · %? keys$"), "the hint line at 79 columns: " .. H.lines(buf)[2])
H.check(H.lines(buf)[2] == require("pi_lsp.tree").help_line(79), "the tree shows the hint for its width")
-- A closed fold's line keeps room for its "… N more lines".
local folded = closed_folds()
H.check(#folded > 0, "there is a closed fold")
for _, text in ipairs(folded) do
  H.check(vim.fn.strdisplaywidth(text) <= 79 and text:find("… %d+ more lines?$"), "a closed fold's text fits with its count: " .. text)
end
H.dump(":PiTree (79 columns)", buf)
resize(50)
H.wait(function()
  return fits(50)
end, "the tree was not laid out again for 50 columns", buf)
for _, text in ipairs(closed_folds()) do
  H.check(text:find("e1afef94", 1, true) == nil or text:find("… %d+ more lines?$"), "at 50 columns too: " .. text)
end

-- `?` lists every key with what it does, not the names of the actions.
H.keys("?")
local listing = H.messages[#H.messages]
H.check(listing:find("R         restore the files to the entry (diff first)", 1, true) and listing:find("U         undo the last restore of files", 1, true),
  "`?` says what the keys do: " .. listing)
H.check(not listing:find("restore_files", 1, true) and not listing:find("undo_restore", 1, true), "no internal names: " .. listing)
H.check(H.lines(buf)[H.line_of(buf, "← leaf")]:find("← leaf$"), "the leaf mark ends its line", buf)
H.check(dead_end_line():find(" 28511eec assistant: .*  %[orm%-dead%-end%]$"), "the label stays whole", buf)
H.check(H.lines(buf)[H.entry(buf, "c66a750f")]:find("  %[tests%-green%]$"), "every label stays whole", buf)
H.check(H.lines(buf)[H.entry(buf, "24652ae8")]:find("…$"), "a long preview is cut", buf)

-- Branch to the dead end with `b`: the server's leaf moves, the buffer follows.
vim.cmd("normal! zR")
vim.api.nvim_win_set_cursor(0, { H.entry(buf, "28511eec"), 0 })
H.keys("b")
H.wait(function()
  local line = H.lines(buf)[H.entry(buf, "28511eec") or 1]
  return line:find("← leaf", 1, true) ~= nil
end, "the tree did not re-render with the new leaf", buf)
H.check(H.exec("pi.getTree", { uri = vim.b[buf].pi_lsp_uri }).leafId == "28511eec", "the server's leaf is 28511eec")
H.check(H.lines(buf)[H.entry(buf, "28511eec")]:find("* 28511eec", 1, true), "the new leaf is on the path", buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(buf, "28511eec"), "the cursor stays on the entry")

-- The branch left comes folded; its fold was open, so its rows are fetched again as it scrolls
-- into view (a UI fires WinScrolled; headless, fire it here).
vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
vim.api.nvim_exec_autocmds("WinScrolled", { pattern = tostring(vim.api.nvim_get_current_win()) })
H.wait(function()
  return H.entry(buf, "c66a750f") ~= nil
end, "the rows of the open fold of the branch left were not fetched", buf)
-- Label the old leaf with `l`.
vim.api.nvim_win_set_cursor(0, { H.entry(buf, "c66a750f"), 0 })
table.insert(H.inputs, "regression-test")
H.keys("l")
H.wait(function()
  return H.contains(buf, "[regression-test]")
end, "the new label did not appear", buf)
local labelled = H.lines(buf)[H.entry(buf, "c66a750f")]
H.check(labelled:find("[regression-test]", 1, true), "the label sits on c66a750f: " .. labelled)
-- The label's draw folds the new label row's sibling; the current path's branch stays open.
H.check(vim.fn.foldclosed(H.entry(buf, "e1afef94")) == -1, "the current path's branch was folded", buf)

-- Preview the context at an entry with `p`: the server's Markdown, token counts.
vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
vim.api.nvim_win_set_cursor(0, { H.entry(buf, "24652ae8"), 0 })
H.keys("p")
local preview = H.wait_buf("pi://context/", "# Context at `24652ae8`", "the context preview did not open")
H.check(H.contains(preview, "tokens · `e0c67744`"), "per-message token counts", preview)
H.check(H.text(preview):find("# Context at `24652ae8` — [%d,]+ of 200,000 tokens"), "total against the window", preview)

-- Diff against the leaf with `d`.
vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
vim.api.nvim_win_set_cursor(0, { H.entry(buf, "c66a750f"), 0 })
H.keys("d")
local diff = H.wait_buf("pi://diff/", "Only at the leaf", "the diff did not open")
H.check(H.contains(diff, "# Context at `c66a750f` against the leaf `"), "diff header", diff)
H.check(H.contains(diff, "`e1afef94` user: `OK, that makes sense. How should we fix the data layer?`"), "entries only at the leaf are listed", diff)

-- :PiContext with an entry argument, from a non-pi buffer (session last used).
vim.cmd("enew")
vim.cmd("PiContext 4e303b25")
H.wait(function()
  return H.contains(preview, "# Context at `4e303b25`")
end, ":PiContext 4e303b25 did not render", preview)
H.check(H.contains(preview, "**Model** `anthropic/claude-opus-4-5`"), "model line", preview)
H.dump(":PiContext 4e303b25", preview)

-- The statusline shows the session of the buffer (or the last used).
H.wait(function()
  return require("pi_lsp").statusline():find("claude", 1, true) ~= nil
end, "statusline: " .. require("pi_lsp").statusline())
H.check(require("pi_lsp").statusline():find("/200k", 1, true), "statusline shows the window: " .. require("pi_lsp").statusline())

-- A session with every entry type: the tree draws exactly the server's rows (usage records,
-- leaf moves and context edits left out, their children lifted), as the VS Code view does.
local every = vim.fn.getcwd() .. "/.pi/sessions/every-type.jsonl"
vim.fn.writefile(vim.fn.readfile(vim.env.PI_LSP_EVERY_TYPE, "b"), every, "b")
local rows = H.exec("pi.getTree", { uri = vim.uri_from_fname(every) }).nodes
require("pi_lsp.tree").open(vim.uri_from_fname(every))
local every_buf = H.wait_buf("pi://tree/every-type", "← leaf", "the every-type tree did not render")
-- Every fold opened: the rows folded off the path are fetched.
H.keys("zR")
H.wait(function()
  return not H.contains(every_buf, "more rows")
end, "opening every fold did not fetch the folded rows", every_buf)
local drawn = H.lines(every_buf)
H.check(drawn[1]:find("^Every type — 15 entries, leaf u3"), "header: " .. drawn[1])
H.check(#drawn == 2 + #rows and #rows == 10, "one line per row", every_buf)
for i, row in ipairs(rows) do
  local prefix = ("  "):rep(row.depth) .. (row.head and "├─ " or "")
  local line = drawn[2 + i]
  H.check(line:sub(1, #prefix) == prefix and line:find(" " .. row.id .. " ", 1, true), "row " .. row.id .. ": " .. line)
end
H.check(H.lines(every_buf)[H.line_of(every_buf, "← leaf")]:find(" u3 user", 1, true), "the leaf mark sits on u3, above the hidden move", every_buf)

-- The end of a long path can be many forks deep: rows are indented from the shallowest drawn.
local deep = require("pi_lsp.tree").layout({ nodes = {
  { id = "d1", depth = 1600, head = false, type = "message", role = "user", preview = "deep" },
  { id = "d2", depth = 1601, head = true, type = "message", role = "user", preview = "deeper", hidden = 0 },
} }, 80)
H.check(deep[1] == "  d1 user: deep" and deep[2] == "  ├─   d2 user: deeper", "indented from the shallowest row: " .. vim.inspect(deep))

-- A folded row's "… N more rows" line belongs to its fold, not to the branch its first page ended in.
local layout_of = require("pi_lsp.tree")
local unfolded = layout_of.unfold({ nodes = { { id = "B", depth = 1, head = true, type = "message", role = "user", preview = "b", hidden = 8 } } },
  { B = { total = 8, depth = 1, head = true, rows = {
    { id = "x1", depth = 1, head = false, type = "message", role = "user", preview = "x" },
    { id = "S1", depth = 2, head = true, type = "message", role = "user", preview = "s" },
    { id = "S2", depth = 2, head = true, type = "message", role = "user", preview = "s" },
    { id = "s2", depth = 2, head = false, type = "message", role = "user", preview = "s" },
  } } })
local under_lines, _, under_folds = layout_of.layout(unfolded, 80)
H.check(under_lines[6] == "  … 4 more rows", "the line: " .. vim.inspect(under_lines))
-- One row or branch left is "1 more row", "1 more branch", "1 earlier row" (it was "rows").
local function more_line(more)
  return layout_of.layout({ nodes = { vim.tbl_extend("force", { more = true, depth = 0 }, more) } }, 80)[1]
end
local counted = { more_line({ count = 1, under = "B" }), more_line({ count = 1, after = "B" }),
  more_line({ count = 1 }), more_line({ count = 2, after = "B" }) }
H.check(vim.deep_equal(counted, { "… 1 more row", "… 1 more branch", "… 1 earlier row", "… 2 more branches" }),
  "one row or branch: " .. vim.inspect(counted))
for _, fold in ipairs(under_folds) do
  H.check(fold[1] == 1 or fold[2] < 6, "a branch's fold hides the line: " .. vim.inspect(under_folds))
end

-- Another program appends: the tree is patched from pi/sessionChanged, not fetched again.
local client = require("pi_lsp.client")
local exec, fetched = client.exec, 0
client.exec = function(command, ...)
  fetched = fetched + (command == "pi.getTree" and 1 or 0)
  return exec(command, ...)
end
vim.fn.writefile({
  vim.json.encode({
    type = "message", id = "u5", parentId = "cl2", timestamp = "2026-12-01T10:00:16.000Z",
    message = { role = "user", content = "Appended by the pi CLI", timestamp = 1796119216000 },
  }),
}, every, "a")
H.wait(function()
  return H.entry(every_buf, "u5") ~= nil
end, "the appended entry did not appear", every_buf)
client.exec = exec
local appended = H.lines(every_buf)[H.entry(every_buf, "u5")]
H.check(appended:find("^  %* u5 user: Appe.*  ← leaf$") and H.entry(every_buf, "u5") == H.entry(every_buf, "u3") + 1,
  "a row after u3, the leaf now: " .. appended)
H.check(H.lines(every_buf)[1]:find("16 entries, leaf u5", 1, true), "header: " .. H.lines(every_buf)[1])
H.check(fetched == 0, "the tree was patched, not fetched (" .. fetched .. " pi.getTree)")

-- A context edit last in the file is the leaf but no row: the header named its id, while
-- "← leaf" marked the row above it; both name that row now.
vim.fn.writefile({
  vim.json.encode({
    type = "context_edit", id = "ce2", parentId = "u5", timestamp = "2026-12-01T10:00:17.000Z",
    targetId = "u3", replacement = vim.NIL,
  }),
}, every, "a")
H.wait(function()
  return H.lines(every_buf)[1]:find("17 entries", 1, true)
end, "the context edit was not read", every_buf)
H.check(H.lines(every_buf)[1]:find("17 entries, leaf u5", 1, true) and H.entry(every_buf, "ce2") == nil
  and H.lines(every_buf)[H.entry(every_buf, "u5")]:find("← leaf$"), "header: " .. H.lines(every_buf)[1], every_buf)

-- A long context's preview: the first and last 50 messages at once, `+` shows more.
local long = vim.fn.getcwd() .. "/.pi/sessions/long-context.jsonl"
local long_lines = {
  vim.json.encode({ type = "session", version = 3, id = "long-context", timestamp = "2026-12-01T10:00:00.000Z", cwd = "/tmp/long" }),
}
for i = 0, 349 do
  long_lines[#long_lines + 1] = vim.json.encode({
    type = "message", id = "c" .. i, parentId = i > 0 and ("c" .. (i - 1)) or vim.NIL, timestamp = "2026-12-01T10:00:01.000Z",
    message = { role = "user", content = "prompt " .. i, timestamp = 1796119201000 },
  })
end
vim.fn.writefile(long_lines, long)
require("pi_lsp.context").preview(vim.uri_from_fname(long))
local long_buf = H.wait_buf("pi://context/long-context", "_… messages 51 to 300 not shown_", "the long context's preview did not show both ends")
H.check(H.contains(long_buf, "## 50. user") and H.contains(long_buf, "## 350. user"), "both ends are shown", long_buf)
vim.api.nvim_set_current_win(vim.fn.bufwinid(long_buf))
-- `+` on the line of the messages left out: the cursor stays on it, where the new ones appear.
vim.api.nvim_win_set_cursor(0, { H.line_of(long_buf, "_… messages 51 to 300 not shown_"), 0 })
H.keys("+")
H.wait(function()
  return H.contains(long_buf, "_… messages 101 to 250 not shown_")
end, "`+` did not show more of the context", long_buf)
H.check(H.contains(long_buf, "## 100. user"), "50 more from each end", long_buf)
local function cursor_text()
  return vim.api.nvim_get_current_line()
end
H.check(cursor_text() == "_… messages 101 to 250 not shown_", "the cursor stays at the gap: " .. cursor_text(), long_buf)
-- On a message: the cursor stays on its text.
vim.api.nvim_win_set_cursor(0, { H.line_of(long_buf, "prompt 320"), 0 })
H.keys("+")
H.wait(function()
  return H.contains(long_buf, "_… messages 151 to 200 not shown_")
end, "a second `+` did not show more of the context", long_buf)
H.check(cursor_text() == "prompt 320", "the cursor stays on its message: " .. cursor_text(), long_buf)
-- Every message shown: from the gap, the cursor goes to the first of those it left out.
vim.api.nvim_win_set_cursor(0, { H.line_of(long_buf, "_… messages 151 to 200 not shown_"), 0 })
H.keys("+")
H.wait(function()
  return not H.contains(long_buf, "not shown_")
end, "a third `+` did not show the whole context", long_buf)
H.check(vim.startswith(cursor_text(), "## 151. user"), "the cursor is at the first message shown now: " .. cursor_text(), long_buf)

-- A session's model name is text in the statusline, never statusline code: drawn with the
-- documented %{%...%}, an expression in it would run.
local planted = vim.fn.getcwd() .. "/.pi/sessions/planted-model.jsonl"
vim.fn.writefile({
  vim.json.encode({ type = "session", version = 3, id = "planted-model", timestamp = "2026-12-01T10:00:00.000Z", cwd = "/tmp/planted" }),
  vim.json.encode({ type = "model_change", id = "m0", parentId = vim.NIL, timestamp = "2026-12-01T10:00:01.000Z",
    provider = "anthropic", modelId = "claude%{execute('let g:pi_pwned = 1')}\n%!x" }),
  vim.json.encode({ type = "message", id = "m1", parentId = "m0", timestamp = "2026-12-01T10:00:02.000Z",
    message = { role = "user", content = "hi", timestamp = 1796119202000 } }),
  vim.json.encode({ type = "message", id = "nl\nid", parentId = "m1", timestamp = "2026-12-01T10:00:02.500Z",
    message = { role = "user", content = "again", timestamp = 1796119202500 } }),
  vim.json.encode({ type = "label", id = "m2\nx", parentId = "nl\nid", timestamp = "2026-12-01T10:00:03.000Z",
    targetId = "m1", label = "two\nlines" }),
}, planted)
require("pi_lsp.tree").open(vim.uri_from_fname(planted)) -- the current buffer's session
require("pi_lsp.session").use(vim.uri_from_fname(planted), vim.fn.getcwd())
H.wait(function()
  return require("pi_lsp").statusline():find("execute", 1, true) ~= nil
end, "the planted model did not reach the statusline")
local planted_buf = H.wait_buf("pi://tree/planted-model", "[two lines]", "a label with a line break did not draw as one line")
H.check(H.contains(planted_buf, "leaf m2 x"), "the leaf's id with a line break is one line", planted_buf)
local drawn_status = vim.api.nvim_eval_statusline("%{%v:lua.require'pi_lsp'.statusline()%}", { maxwidth = 500 }).str
H.check(vim.g.pi_pwned == nil, "the model name ran as an expression: " .. drawn_status)
H.check(drawn_status:find("claude%{execute('let g:pi_pwned = 1')} %!x", 1, true), "shown as written: " .. drawn_status)

-- Ids with line breaks in the context diff (from the first row to the leaf `m2\nx`) and in a
-- compaction plan (its kept entry, its paths): each is one line, so the buffers draw.
vim.api.nvim_set_current_win(vim.fn.bufwinid(planted_buf))
vim.api.nvim_win_set_cursor(0, { H.entry(planted_buf, "m0"), 0 })
require("pi_lsp.tree").actions.diff(planted_buf)
local diff_buf = H.wait_buf("pi://diff/planted-model", "- `nl id`", "the context diff did not draw (an id with a line break)")
H.check(H.contains(diff_buf, "against the leaf `m2 x`"), "the leaf's id is one line", diff_buf)
local plan = require("pi_lsp.context").plan_lines({ tokensBefore = 1200, messagesToSummarize = 2,
  firstKeptEntryId = "nl\nid", readFiles = { "a\nb.py" }, modifiedFiles = { "c\r.py" } })
local plan_buf = vim.api.nvim_create_buf(false, true)
vim.api.nvim_buf_set_lines(plan_buf, 0, -1, false, plan) -- raises on a line holding a newline
H.check(H.contains(plan_buf, "first kept entry: `nl id`") and H.contains(plan_buf, "read files: `a b.py`")
  and H.contains(plan_buf, "modified files: `c .py`"), "the plan's ids and paths are one line each", plan_buf)

-- Rows fetched under a folded row are drawn only while they are still what the server has
-- there: after a change, the tree is the one fetched afresh.
local T = require("pi_lsp.tree")
local function entry(id, parent, role)
  local message = role == "assistant"
      and { role = role, content = { { type = "text", text = "answer " .. id } }, api = "anthropic-messages", provider = "anthropic",
        model = "claude-sonnet-4-5", usage = { input = 1, output = 1, cacheRead = 0, cacheWrite = 0, totalTokens = 2,
          cost = { input = 0, output = 0, cacheRead = 0, cacheWrite = 0, total = 0 } }, stopReason = "stop", timestamp = 1796119201000 }
    or { role = "user", content = "prompt " .. id, timestamp = 1796119201000 }
  return vim.json.encode({ type = "message", id = id, parentId = parent or vim.NIL, timestamp = "2026-12-01T10:00:01.000Z", message = message })
end
--- A session file of `entries` ({id, parent, role}), its tree open; the tree's buffer.
local function open_session(name, entries)
  local path = vim.fn.getcwd() .. "/.pi/sessions/" .. name .. ".jsonl"
  local lines = { vim.json.encode({ type = "session", version = 3, id = name, timestamp = "2026-12-01T10:00:00.000Z", cwd = "/tmp/" .. name }) }
  for _, e in ipairs(entries) do
    lines[#lines + 1] = entry(unpack(e))
  end
  vim.fn.writefile(lines, path)
  T.open(vim.uri_from_fname(path))
  return H.wait_buf("pi://tree/" .. name, "← leaf", "the " .. name .. " tree did not render"), path
end
--- Fetch the tree of `tree_buf` again; wait until it is drawn anew and `ready()` holds.
local function fetch_again(tree_buf, ready, message)
  local before = T.view(tree_buf).tree
  T.refresh(tree_buf)
  H.wait(function()
    return T.view(tree_buf).tree ~= before and (ready == nil or ready())
  end, message or "the tree was not fetched again", tree_buf)
end
--- Check that the tree's buffer draws the rows the server has now, every folded row's rows
--- after it (each at its depth, with its label).
local function check_as_fetched(tree_buf)
  local uri, rows = T.view(tree_buf).uri, {}
  for _, node in ipairs(H.exec("pi.getTree", { uri = uri, limit = 300 }).nodes) do
    rows[#rows + 1] = node
    if (node.hidden or 0) > 0 then
      vim.list_extend(rows, H.exec("pi.getTree", { uri = uri, under = node.id, start = 0, limit = 500 }).nodes)
    end
  end
  local drawn = H.lines(tree_buf)
  for i, row in ipairs(rows) do
    local start = ("  "):rep(row.depth) .. (row.head and "├─ " or "") .. (row.onPath and "*" or " ") .. " " .. row.id .. " "
    local line = drawn[2 + i] or ""
    H.check(line:sub(1, #start) == start and (not row.label or line:find("[" .. row.label .. "]", 1, true)),
      ("row %d: %q, not %q%s"):format(i, line, start, row.label and (" [" .. row.label .. "]") or ""), tree_buf)
  end
  H.check(#drawn == 2 + #rows, "rows drawn: " .. (#drawn - 2) .. " of " .. #rows, tree_buf)
end
--- Wait for the tree to show `id` with every folded row's rows fetched (none still "more").
local function settled(tree_buf, id)
  H.wait(function()
    local fetching = T.view(tree_buf).fetching
    return H.entry(tree_buf, id) ~= nil and not H.contains(tree_buf, "more rows") and next(fetching.under) == nil
      and next(fetching.after) == nil
  end, id .. " did not appear with the folded rows fetched", tree_buf)
end

-- Gone back to an earlier answer, then asked again: the folded row after it becomes a fork one
-- deeper with the same count, and its rows are drawn at their new depth, inside its fold.
local back_buf, back = open_session("back-again", {
  { "q0" }, { "a0", "q0", "assistant" }, { "q1", "a0" }, { "a1", "q1", "assistant" },
  { "q2", "a1" }, { "a2", "q2", "assistant" }, { "q3", "a1" }, { "a3", "q3", "assistant" },
})
H.exec("pi.branch", { uri = T.view(back_buf).uri, targetId = "a0" }) -- as `b` does, without its refresh
H.wait(function()
  return (H.lines(back_buf)[H.entry(back_buf, "a0")] or ""):find("← leaf", 1, true)
end, "the branch to a0 did not show", back_buf)
settled(back_buf, "a3")
vim.fn.writefile({ entry("q4", "a0") }, back, "a")
settled(back_buf, "q4")
check_as_fetched(back_buf)

-- Another writer goes on inside a folded branch (and back on the path): the folded row's count
-- grows, and its rows are fetched again from the top, not the old ones with a page added.
local grow_buf, grow = open_session("grows-inside", {
  { "r0" }, { "r1", "r0", "assistant" }, { "x0", "r1" }, { "x1", "x0", "assistant" }, { "y0", "r1" },
  { "y1", "y0", "assistant" }, { "p0" }, { "p1", "p0", "assistant" }, { "p2", "p1" },
})
vim.api.nvim_win_set_cursor(0, { H.entry(grow_buf, "r0"), 0 })
H.keys("zo")
settled(grow_buf, "y1")
vim.fn.writefile({ entry("x2", "x1"), entry("p3", "p2") }, grow, "a")
settled(grow_buf, "p3")
check_as_fetched(grow_buf)

-- Another program labels a row under an open folded row: the label shows (the folded row's
-- count does not change, its rows are fetched again).
local label_buf, labelled_path = open_session("label-inside", {
  { "a0" }, { "a1", "a0", "assistant" }, { "b0", "a1" }, { "b1", "b0", "assistant" }, { "b2", "b1" },
  { "c0", "a1" }, { "c1", "c0", "assistant" }, { "c2", "c1" },
})
vim.api.nvim_win_set_cursor(0, { H.entry(label_buf, "b0"), 0 })
H.keys("zo")
settled(label_buf, "b2")
vim.fn.writefile({ vim.json.encode({ type = "label", id = "L1", parentId = "c2", timestamp = "2026-12-01T10:00:02.000Z",
  targetId = "b2", label = "good idea" }) }, labelled_path, "a")
settled(label_buf, "L1")
H.check(H.lines(label_buf)[H.entry(label_buf, "b2")]:find("[good idea]", 1, true), "the label on b2 shows", label_buf)
check_as_fetched(label_buf)

-- A branch folded inside a closed fold keeps its own state through a draw: closed here, it is
-- still closed when the fold around it opens.
local nested_buf, nested_path = open_session("nested-folds", {
  { "a0" }, { "a1", "a0", "assistant" }, { "b0", "a1" }, { "b1", "b0", "assistant" },
  { "c0", "b1" }, { "c1", "c0", "assistant" }, { "d0", "b1" }, { "d1", "d0", "assistant" },
  { "e0", "a1" }, { "e1", "e0", "assistant" },
})
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "b0"), 0 })
H.keys("zo")
settled(nested_buf, "c0")
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == H.entry(nested_buf, "c0"), "the inner branch starts folded", nested_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "b0"), 0 })
vim.cmd("normal! zc")
vim.fn.writefile({ entry("e2", "e1") }, nested_path, "a")
settled(nested_buf, "e2")
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "b0"), 0 })
H.keys("zo")
H.check(vim.fn.foldclosed(H.entry(nested_buf, "b0")) == -1 and vim.fn.foldclosed(H.entry(nested_buf, "c0")) == H.entry(nested_buf, "c0"),
  "the inner branch is folded still", nested_buf)
-- zR, a draw, then zm: the deepest folds close again ('foldlevel' is the deepest fold's, not 99).
vim.cmd("normal! zR")
vim.fn.writefile({ entry("e3", "e2") }, nested_path, "a")
settled(nested_buf, "e3")
vim.cmd("normal! zm")
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == H.entry(nested_buf, "c0") and vim.fn.foldclosed(H.entry(nested_buf, "b0")) == -1,
  "zm after a draw did not fold the deepest branches", nested_buf)
-- Hidden and shown again: the folds as they were left (d0 opened, against the configured).
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "d0"), 0 })
vim.cmd("normal! zo")
vim.cmd("enew")
T.open(T.view(nested_buf).uri)
H.wait(function()
  return vim.fn.bufwinid(nested_buf) ~= -1 and T.view(nested_buf).win == vim.fn.bufwinid(nested_buf)
end, "the tree was not drawn again", nested_buf)
settled(nested_buf, "c0")
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == H.entry(nested_buf, "c0") and vim.fn.foldclosed(H.entry(nested_buf, "b0")) == -1
  and vim.fn.foldclosed(H.entry(nested_buf, "d0")) == -1, "the folds shown again are not as they were left", nested_buf)
local nested_n = 3
--- Another writer's entry on the path, drawn.
local function grow_nested()
  nested_n = nested_n + 1
  vim.fn.writefile({ entry("e" .. nested_n, "e" .. (nested_n - 1)) }, nested_path, "a")
  H.wait(function()
    return T.view(nested_buf).by_id["e" .. nested_n] ~= nil
  end, "e" .. nested_n .. " was not drawn", nested_buf)
end
-- :PiTree on the tree shown keeps its folds.
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "b0"), 0 })
vim.cmd("normal! zc")
T.open(T.view(nested_buf).uri)
grow_nested()
H.check(vim.fn.foldclosed(H.entry(nested_buf, "b0")) == H.entry(nested_buf, "b0"), ":PiTree opened the folds", nested_buf)
-- zM, a draw, zm: nothing opens; zn holds through a draw.
vim.cmd("normal! zM")
grow_nested()
vim.cmd("normal! zm")
H.check(vim.wo.foldlevel == 0 and vim.fn.foldclosed(H.entry(nested_buf, "b0")) == H.entry(nested_buf, "b0"),
  "zm after zM and a draw opened folds (foldlevel " .. vim.wo.foldlevel .. ")", nested_buf)
vim.cmd("normal! zn")
grow_nested()
H.check(not vim.wo.foldenable, "a draw turned folding on again", nested_buf)
vim.cmd("normal! zN")
H.keys("zR") -- b0's rows, dropped by :PiTree's fetch while it was folded, come again
H.wait(function()
  return H.entry(nested_buf, "c0") ~= nil
end, "b0's rows did not come when its fold opened", nested_buf)
-- Drawn while its tab page is not shown: the folds stay as they were (c0 folded, b0 open).
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "b0"), 0 })
if vim.fn.foldclosed(H.entry(nested_buf, "b0")) ~= -1 then
  vim.cmd("normal! zo")
end
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "c0"), 0 })
if vim.fn.foldclosed(H.entry(nested_buf, "c0")) == -1 then
  vim.cmd("normal! zc")
end
local tree_tab = vim.api.nvim_get_current_tabpage()
vim.cmd("tabnew")
grow_nested()
vim.api.nvim_set_current_tabpage(tree_tab)
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == H.entry(nested_buf, "c0") and vim.fn.foldclosed(H.entry(nested_buf, "b0")) == -1,
  "a draw in another tab page lost the folds", nested_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "c0"), 0 })
vim.cmd("normal! zo")
grow_nested()
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == -1, "after a draw in another tab page, the next undid zo", nested_buf)
vim.cmd("normal! zc")
-- Drawn while hidden, shown again with :buffer: what is done there holds through the next draw.
vim.cmd("enew")
grow_nested()
vim.cmd("buffer " .. nested_buf)
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == H.entry(nested_buf, "c0"), "shown with :buffer, the folds were lost", nested_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "c0"), 0 })
vim.cmd("normal! zo")
grow_nested()
H.check(vim.fn.foldclosed(H.entry(nested_buf, "c0")) == -1, "a draw undid zo in a window showing the tree through :buffer", nested_buf)
-- zn, a draw, zN: the folds as they were (with folding off, none shows shut).
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "b0"), 0 })
vim.cmd("normal! zc")
vim.cmd("normal! zn")
grow_nested()
vim.cmd("enew")
H.check(vim.wo.foldenable, "zn in the tree turned folding off for the next buffer in its window")
vim.cmd("buffer " .. nested_buf)
vim.cmd("normal! zN")
H.check(vim.fn.foldclosed(H.entry(nested_buf, "b0")) == H.entry(nested_buf, "b0"), "after zn, a draw and zN, b0 came back open", nested_buf)
vim.cmd("normal! zo")
-- Shown in a second window too: it starts with this one's folds; closed again, this one's hold.
local first_win = vim.api.nvim_get_current_win()
vim.cmd("vsplit | enew | buffer " .. nested_buf)
H.check(vim.fn.foldclosed(H.entry(nested_buf, "b0")) == -1, "the second window shows b0 shut", nested_buf)
vim.cmd("close")
grow_nested()
H.check(vim.api.nvim_get_current_win() == first_win and vim.fn.foldclosed(H.entry(nested_buf, "b0")) == -1,
  "a draw shut b0 after the second window closed", nested_buf)
-- Shown in two tab pages: the window worked in keeps its folds through draws.
vim.cmd("tabnew")
T.open(T.view(nested_buf).uri)
H.wait(function()
  return T.view(nested_buf).win == vim.api.nvim_get_current_win()
end, "the tree did not show in the second tab page", nested_buf)
vim.api.nvim_set_current_tabpage(tree_tab)
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "e0"), 0 })
vim.cmd("normal! zc")
grow_nested()
H.check(vim.fn.foldclosed(H.entry(nested_buf, "e0")) == H.entry(nested_buf, "e0"), "a draw opened e0 in the window worked in", nested_buf)
vim.cmd("normal! zo")
-- A split from the tree's window that shows another buffer at once (:split | enew, as the
-- preview does) does not take the tree's folds elsewhere. (In the second tab page's window:
-- the first found is the other.)
vim.cmd("tabnext")
vim.api.nvim_win_set_cursor(0, { H.entry(nested_buf, "e0"), 0 })
vim.cmd("normal! zc")
vim.cmd("botright split | enew")
grow_nested()
vim.cmd("close")
grow_nested()
H.check(vim.fn.foldclosed(H.entry(nested_buf, "e0")) == H.entry(nested_buf, "e0"), "a split from the tree's window lost its zc", nested_buf)
vim.cmd("tabonly")

-- A later page of a folded row's rows still on its way when the tree is fetched again: dropped
-- when it comes (the rows it followed are gone), and then the rows are fetched again from the
-- top though out of view: they were open.
local long_entries = { { "r0" }, { "x0", "r0" } }
for n = 1, 502 do
  long_entries[#long_entries + 1] = { "x" .. n, "x" .. (n - 1) }
end
for n = 1, 40 do
  long_entries[#long_entries + 1] = { "r" .. n, "r" .. (n - 1) }
end
local long_buf = open_session("late-page", long_entries)
vim.api.nvim_win_set_cursor(0, { H.entry(long_buf, "x0"), 0 })
H.keys("zo")
H.wait(function()
  return H.entry(long_buf, "x500") ~= nil and H.line_of(long_buf, "… 2 more rows")
end, "the first page of x0's rows did not come", long_buf)
local late
local exec_before = client.exec
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.under == "x0" and args.start > 0 then
    late = callback
    return
  end
  return exec_before(command, args, callback, ...)
end
vim.api.nvim_win_set_cursor(0, { H.line_of(long_buf, "… 2 more rows"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = long_buf })
H.check(late ~= nil, "the later page was not asked for", long_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(long_buf, "r40"), 0 })
local held_late = T.view(long_buf).unfolded
T.refresh(long_buf)
H.wait(function()
  return T.view(long_buf).unfolded ~= held_late and H.entry(long_buf, "x1") == nil
end, "the tree was not fetched again", long_buf)
client.exec = exec_before
late(nil, H.exec("pi.getTree", { uri = T.view(long_buf).uri, under = "x0", start = 500, limit = 500 }))
H.wait(function()
  return H.entry(long_buf, "x1") ~= nil
end, "x0's rows were not fetched again after the late page", long_buf)
-- Rows held past the first page come back page after page when the tree is fetched again, and
-- the cursor on one goes back to it.
H.wait(function()
  return H.line_of(long_buf, "… 2 more rows")
end, "no second page to ask for", long_buf)
vim.api.nvim_win_set_cursor(0, { H.line_of(long_buf, "… 2 more rows"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = long_buf })
H.wait(function()
  return H.entry(long_buf, "x502") ~= nil
end, "the second page did not come", long_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(long_buf, "x501"), 0 })
fetch_again(long_buf, function()
  return H.entry(long_buf, "x502") ~= nil
end, "the rows past the first page did not come back")
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(long_buf, "x501"), "the cursor left x501", long_buf)
-- Fetched again twice while the second page is on its way: the rows still come back, every page.
local held_second
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.under == "x0" and args.start > 0 and not held_second then
    held_second = function()
      exec_before(command, args, callback)
    end
    return
  end
  return exec_before(command, args, callback, ...)
end
fetch_again(long_buf, function()
  return held_second ~= nil
end, "the second page was not asked for")
fetch_again(long_buf)
client.exec = exec_before
held_second()
H.wait(function()
  return H.entry(long_buf, "x502") ~= nil
end, "the rows past the first page did not come back after two refreshes", long_buf)

-- A tree's window options stay with the tree: another buffer shown there gets the window's own.
local plain_buf = open_session("plain", { { "p0" }, { "p1", "p0", "assistant" }, { "q0", "p0" }, { "q1", "q0", "assistant" } })
vim.cmd("enew")
H.check(vim.wo.foldmethod ~= "expr" and vim.wo.wrap, "the next buffer in the tree's window took its fold and wrap options")
-- Deleted (:bdelete), then opened again: drawn anew, no error.
local plain_uri = T.view(plain_buf).uri
vim.cmd("bdelete " .. plain_buf)
T.open(plain_uri)
plain_buf = H.wait_buf("pi://tree/plain", "← leaf", "the tree did not draw again after :bdelete")
-- Deleted, then shown again with :buffer, or read again with :edit: drawn again, with its keys.
vim.cmd("bdelete " .. plain_buf)
vim.cmd("buffer " .. plain_buf)
H.check(H.contains(plain_buf, "← leaf") and vim.fn.maparg("zo", "n") ~= "", ":buffer after :bdelete showed the tree blank or without keys", plain_buf)
fetch_again(plain_buf)
local plain_opts = { vim.bo[plain_buf].buftype, vim.bo[plain_buf].filetype, vim.bo[plain_buf].modified, vim.b[plain_buf].pi_lsp_uri }
H.check(vim.deep_equal(plain_opts, { "nofile", "pitree", false, plain_uri }), "the tree shown again lost its options: " .. vim.inspect(plain_opts), plain_buf)
local plain_wins = #vim.api.nvim_tabpage_list_wins(0)
vim.cmd("edit")
H.check(H.contains(plain_buf, "← leaf") and #vim.api.nvim_tabpage_list_wins(0) == plain_wins, ":edit left the tree blank or closed it", plain_buf)
-- Deleted, then loaded in no window (bufload(), as a session plugin may) and shown in a narrow
-- one: laid out for that window, with what changed meanwhile, the cursor back on its entry.
-- (Opened from an editing window, which is the one current after :bdelete, with no cursor
-- position of its own in the tree; the tree's cursor last moved without entering its window,
-- as a mouse wheel moves it.)
vim.cmd("only | enew")
local reload_buf, reload_path = open_session("reload", { { "r0" }, { "r1", "r0", "assistant" }, { "s0", "r0" }, { "s1", "s0", "assistant" } })
local reload_win = vim.api.nvim_get_current_win()
vim.api.nvim_win_set_cursor(0, { H.entry(reload_buf, "r1"), 0 })
vim.cmd("wincmd p")
vim.api.nvim_win_set_cursor(reload_win, { H.entry(reload_buf, "s0"), 0 })
vim.cmd("bdelete " .. reload_buf)
vim.fn.writefile({ entry("t0", "s1"), entry("t1", "t0", "assistant") }, reload_path, "a")
H.wait(function()
  return T.view(reload_buf).tree.entries == 6
end, "the change that came while the tree was unloaded was dropped", reload_buf)
vim.cmd("vsplit | enew")
vim.fn.bufload(reload_buf)
vim.cmd("buffer " .. reload_buf)
local narrow = vim.api.nvim_win_get_width(0) - vim.fn.getwininfo(vim.api.nvim_get_current_win())[1].textoff
H.check(T.view(reload_buf).width == narrow, ("laid out for %s cells in a window of %d"):format(T.view(reload_buf).width, narrow), reload_buf)
H.check(H.entry(reload_buf, "t1") ~= nil, "the entries that came while it was unloaded are not drawn", reload_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(reload_buf, "s0"), "the cursor is not back on s0: on line " .. vim.api.nvim_win_get_cursor(0)[1], reload_buf)
vim.cmd("only")
-- On a "… N more branches" line when deleted, the cursor comes back to that line, though a
-- row above it grew meanwhile.
vim.cmd("enew")
local fan = { { "f0" } }
for n = 0, 301 do
  fan[#fan + 1] = { "g" .. n, "f0" }
end
fan[#fan + 1] = { "f1", "f0" }
local fan_buf, fan_path = open_session("fan-reload", fan)
vim.api.nvim_win_set_cursor(0, { H.line_of(fan_buf, "… 2 more branches"), 0 })
local fan_entries = T.view(fan_buf).tree.entries
vim.cmd("bdelete " .. fan_buf)
vim.fn.writefile({ entry("h0", "g0", "assistant"), vim.json.encode({ type = "custom", id = "m9", parentId = "f1",
  timestamp = "2026-12-01T10:00:09.000Z", customType = "pi-lsp.leaf", data = { targetId = "f1" } }) }, fan_path, "a")
H.wait(function()
  return T.view(fan_buf).tree.entries == fan_entries + 2
end, "the change did not come", fan_buf)
vim.cmd("buffer " .. fan_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.line_of(fan_buf, "… 2 more branches"),
  "the cursor is not back on the line for the rest: on line " .. vim.api.nvim_win_get_cursor(0)[1], fan_buf)
vim.cmd("only")

vim.api.nvim_win_set_cursor(0, { H.entry(plain_buf, "p0"), 0 })
-- (A mapping's error in typed keys only shows as a message: its function is called here.)
local za_ok, za_error = pcall(vim.fn.maparg("za", "n", false, true).callback)
H.check(za_ok, "za on a row with no fold: " .. tostring(za_error), plain_buf)

-- A session begun again from the very start: the first conversation is a folded root beside the
-- path's, never "earlier rows" that a longer path cannot bring.
local roots_buf = open_session("two-roots", { { "a1" }, { "a2", "a1" }, { "b1" }, { "b2", "b1" } })
H.check(not H.contains(roots_buf, "earlier rows") and H.entry(roots_buf, "a1") ~= nil, "the first conversation is a row", roots_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(roots_buf, "a1"), 0 })
H.keys("zo")
H.wait(function()
  return H.entry(roots_buf, "a2") ~= nil
end, "opening the first conversation did not fetch its rows", roots_buf)

-- A fork with more branches than a view sends (300): the last one sent is followed by a
-- "… N more branches" line, outside its fold, that fetches the rest when the cursor reaches it.
local wide_entries = { { "r0" } }
for n = 0, 304 do
  wide_entries[#wide_entries + 1] = { "b" .. n, "r0" }
  wide_entries[#wide_entries + 1] = { "c" .. n, "b" .. n, "assistant" }
end
wide_entries[#wide_entries + 1] = { "r1", "r0" } -- the leaf: the branches come before it
local wide_buf = open_session("wide-fork", wide_entries)
H.check(H.entry(wide_buf, "b299") ~= nil and H.entry(wide_buf, "b300") == nil, "300 branches sent", wide_buf)
local more_line = H.line_of(wide_buf, "… 5 more branches")
H.check(more_line == H.entry(wide_buf, "b299") + 2 and H.lines(wide_buf)[more_line] == "  … 5 more branches",
  "the rest counted after the last branch's row and its folded rows", wide_buf)
H.check(vim.fn.foldclosed(H.entry(wide_buf, "b299")) ~= -1 and vim.fn.foldclosed(more_line) == -1,
  "the last branch is folded, the line for the rest is not", wide_buf)
-- A page whose counts disagree with the row drawn (the tree changed while it came) is dropped: not
-- asked for again and again while the cursor stays on the line. (Answered at once by a stand-in.)
local real_exec, asked = client.exec, 0
client.exec = function(command, args, callback, ...)
  if command ~= "pi.getTree" or not args.after then
    return real_exec(command, args, callback, ...)
  end
  asked = asked + 1
  if asked <= 3 then
    callback(nil, { after = args.after, start = args.start, total = 6, rows = 12, nodes = {} })
  end
end
vim.api.nvim_win_set_cursor(0, { more_line, 0 })
-- A UI fires CursorMoved when the cursor moves; a headless script's moves do not, so fire it here.
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = wide_buf })
for _ = 1, 3 do -- nor as the window scrolls
  vim.api.nvim_exec_autocmds("WinScrolled", { pattern = tostring(vim.api.nvim_get_current_win()) })
end
-- Nor when the cursor moves in another window on the tree (that one's cursor is elsewhere).
vim.cmd("belowright split")
vim.api.nvim_win_set_cursor(0, { H.entry(wide_buf, "r0"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = wide_buf })
vim.cmd("close")
client.exec = real_exec
H.check(asked == 1 and H.line_of(wide_buf, "… 5 more branches") == more_line, "asked " .. asked .. " times", wide_buf)
-- A page that comes after the tree was fetched again goes with the rows held then.
local answer
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.after then
    answer = callback
    return
  end
  return real_exec(command, args, callback, ...)
end
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = wide_buf })
H.check(answer ~= nil, "the page was not asked for")
local held_then = T.view(wide_buf).branches
T.refresh(wide_buf)
H.wait(function()
  return T.view(wide_buf).branches ~= held_then
end, "the tree was not fetched again", wide_buf)
client.exec = real_exec
answer(nil, H.exec("pi.getTree", { uri = T.view(wide_buf).uri, after = "b299", limit = 500 }))
H.wait(function()
  return H.entry(wide_buf, "b304") ~= nil
end, "the page that came after the tree was not drawn", wide_buf)
-- The branches fetched come back when the tree is fetched again. A page that comes after the
-- tree was fetched again, on top of branches fetched before: those are dropped, and fetched
-- again from the top. (A stand-in answers the first page, asked for again at the refresh, with
-- two branches and holds the next; then the server answers.)
local full = H.exec("pi.getTree", { uri = T.view(wide_buf).uri, after = "b299", limit = 500 })
local pages, second = {}, nil
client.exec = function(command, args, callback, ...)
  if command ~= "pi.getTree" or not args.after then
    return real_exec(command, args, callback, ...)
  end
  pages[#pages + 1] = args.start
  if #pages > 2 then
    return real_exec(command, args, callback, ...)
  end
  if #pages == 1 then
    callback(nil, { after = "b299", start = 0, total = 5, rows = 10, nodes = { full.nodes[1], full.nodes[2] } })
  else
    second = callback
  end
end
held_then = T.view(wide_buf).branches
T.refresh(wide_buf)
H.wait(function()
  return T.view(wide_buf).branches ~= held_then and H.entry(wide_buf, "b301") ~= nil and H.line_of(wide_buf, "… 3 more branches")
end, "the branches fetched did not come back after the tree was fetched again", wide_buf)
vim.api.nvim_win_set_cursor(0, { H.line_of(wide_buf, "… 3 more branches"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = wide_buf })
held_then = T.view(wide_buf).branches
T.refresh(wide_buf)
H.wait(function()
  return T.view(wide_buf).branches ~= held_then
end, "the tree was not fetched again", wide_buf)
second(nil, { after = "b299", start = 2, total = 5, rows = 10, nodes = { full.nodes[3], full.nodes[4], full.nodes[5] } })
H.wait(function()
  return H.entry(wide_buf, "b304") ~= nil
end, "the branches dropped were not fetched again: pages " .. vim.inspect(pages), wide_buf)
client.exec = real_exec
H.check(vim.deep_equal(pages, { 0, 2, 0 }), "pages asked: " .. vim.inspect(pages))
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = wide_buf })
H.wait(function()
  return H.entry(wide_buf, "b304") ~= nil
end, "the branches left out did not come when the cursor reached their line", wide_buf)
H.check(not H.contains(wide_buf, "more branches") and H.entry(wide_buf, "r1") == H.entry(wide_buf, "b304") + 2,
  "the rest of the branches drawn before the path goes on", wide_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(wide_buf, "b300"), "the cursor stays on that line, now the first branch fetched", wide_buf)
local last = H.entry(wide_buf, "b304")
H.check(H.lines(wide_buf)[last]:find("^  ├─   b304 user") and vim.fn.foldclosed(last) == last,
  "a branch fetched is drawn and folded as one sent", wide_buf)
vim.api.nvim_win_set_cursor(0, { last, 0 })
H.keys("zo")
H.wait(function()
  return H.entry(wide_buf, "c304") ~= nil
end, "the rows under a branch fetched did not come when its fold opened", wide_buf)
-- The cursor on a branch fetched stays on it as the tree is fetched again.
vim.api.nvim_win_set_cursor(0, { H.entry(wide_buf, "b303"), 0 })
fetch_again(wide_buf, function()
  return H.entry(wide_buf, "b303") ~= nil
end, "the branches fetched did not come back")
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(wide_buf, "b303"), "the cursor left b303", wide_buf)
-- Asked for again at a refresh, a page of branches dropped as stale (counted otherwise than the
-- row drawn) is asked for again at the next draw.
local stale_branches = 0
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.after and stale_branches == 0 then
    stale_branches = 1
    return callback(nil, { after = args.after, start = 0, total = 99, rows = 99, nodes = {} })
  end
  return real_exec(command, args, callback, ...)
end
fetch_again(wide_buf, function()
  return stale_branches == 1
end, "the branches were not asked for at the refresh")
client.exec = real_exec
H.check(H.entry(wide_buf, "b304") == nil, "the stale page was drawn", wide_buf)
T.view(wide_buf).redraw()
H.wait(function()
  return H.entry(wide_buf, "b304") ~= nil
end, "the branches dropped as stale were not asked for again", wide_buf)
-- A page of branches held that fails is not asked for again at every draw.
local branch_failures = 0
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.after then
    branch_failures = branch_failures + 1
    return callback({ message = "a stand-in failure" })
  end
  return real_exec(command, args, callback, ...)
end
fetch_again(wide_buf, function()
  return branch_failures == 1
end, "the branches were not asked for at the refresh")
for _ = 1, 3 do
  local before_draw = T.view(wide_buf).draws
  T.view(wide_buf).redraw()
  H.wait(function()
    return T.view(wide_buf).draws > before_draw
  end, "no draw", wide_buf)
end
client.exec = real_exec
H.check(branch_failures == 1, "asked " .. branch_failures .. " times", wide_buf)
-- Another writer answers inside a branch fetched, then moves the leaf back (pi-lsp's durable move
-- hangs under its target): the view's change
-- counts one more row left out after b299, and the branches fetched (b302's count among them)
-- are fetched again.
local wide_path = vim.uri_to_fname(T.view(wide_buf).uri)
vim.fn.writefile({ entry("d302", "c302", "assistant"), vim.json.encode({ type = "custom", id = "m302", parentId = "r1",
  timestamp = "2026-12-01T10:00:02.000Z", customType = "pi-lsp.leaf", data = { targetId = "r1" } }) }, wide_path, "a")
H.wait(function()
  return H.contains(wide_buf, "… 5 more branches")
end, "the branches fetched were kept after rows came under one of them", wide_buf)
vim.api.nvim_win_set_cursor(0, { H.line_of(wide_buf, "… 5 more branches"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = wide_buf })
H.wait(function()
  return H.entry(wide_buf, "b304") ~= nil
end, "the branches did not come again", wide_buf)
local b302 = T.view(wide_buf).by_id["b302"]
H.check(b302 and b302.hidden == 2, "b302 fetched again, with its two rows: " .. vim.inspect(b302), wide_buf)

-- With fold_off_path off every branch shows open, but only the folded rows in view are fetched
-- (forty would be forty requests and forty redraws at once); the others as they scroll in.
local tree_options = require("pi_lsp.config").options.tree
tree_options.fold_off_path = false
local open_entries = { { "o0" } }
for n = 1, 40 do
  open_entries[#open_entries + 1] = { "h" .. n, "o0" }
  open_entries[#open_entries + 1] = { "i" .. n, "h" .. n, "assistant" }
end
open_entries[#open_entries + 1] = { "o1", "o0" } -- the leaf, below the branches
local under_asked = 0
client.exec = function(command, args, ...)
  if command == "pi.getTree" and args.under then
    under_asked = under_asked + 1
  end
  return real_exec(command, args, ...)
end
local open_buf = open_session("open-branches", open_entries)
H.wait(function()
  return H.entry(open_buf, "i40") ~= nil and next(T.view(open_buf).fetching.under) == nil
end, "the rows of the branch in view did not come", open_buf)
local height = vim.api.nvim_win_get_height(0)
H.check(under_asked > 0 and under_asked <= height and H.entry(open_buf, "i1") == nil and H.contains(open_buf, "… 1 more row\n"),
  ("%d branches' rows asked for with %d lines in view"):format(under_asked, height), open_buf)
vim.api.nvim_win_set_cursor(0, { H.entry(open_buf, "h2"), 0 })
-- A UI fires WinScrolled when the view scrolls; headless, fire it here.
vim.api.nvim_exec_autocmds("WinScrolled", { pattern = tostring(vim.api.nvim_get_current_win()) })
H.wait(function()
  return H.entry(open_buf, "i1") ~= nil and H.entry(open_buf, "i2") ~= nil
end, "the rows of the branches scrolled into view did not come", open_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(open_buf, "h2"), "the cursor follows its row down as rows come above it", open_buf)
-- The tree fetched again (a change the view cannot patch): the rows held come back, in view
-- or not.
local held_open = T.view(open_buf).unfolded
T.refresh(open_buf)
H.wait(function()
  return T.view(open_buf).unfolded ~= held_open and H.entry(open_buf, "i1") ~= nil and H.entry(open_buf, "i40") ~= nil
end, "the rows held before the tree was fetched again did not all come back", open_buf)
-- Shown in a second window below, scrolled there: the rows in that window's view come.
local open_path = vim.uri_to_fname(T.view(open_buf).uri)
H.check(H.entry(open_buf, "i20") == nil, "i20 not fetched yet", open_buf)
vim.cmd("belowright split")
vim.api.nvim_win_set_cursor(0, { H.entry(open_buf, "h20"), 0 })
vim.api.nvim_exec_autocmds("WinScrolled", { pattern = tostring(vim.api.nvim_get_current_win()) })
H.wait(function()
  return H.entry(open_buf, "i20") ~= nil
end, "the rows in view in the second window did not come", open_buf)
vim.cmd("close")
-- Fetched again twice while no window shows it, then shown: the rows held come back.
vim.cmd("enew")
T.refresh(open_buf)
H.wait(function()
  return next(T.view(open_buf).unfolded) == nil
end, "the tree was not fetched again", open_buf)
fetch_again(open_buf)
T.open(T.view(open_buf).uri)
H.wait(function()
  return H.entry(open_buf, "i1") ~= nil and H.entry(open_buf, "i40") ~= nil and H.entry(open_buf, "i20") ~= nil
end, "the rows held did not come back when the tree was shown again", open_buf)
client.exec = real_exec
tree_options.fold_off_path = true

-- After zR (which leaves 'foldlevel' at the deepest fold), a change that adds a one-line branch
-- off the path: the path's own branch stays open, the leaf shown.
local flat_buf, flat_path = open_session("one-line", {
  { "a0" }, { "a1", "a0", "assistant" }, { "q0", "a1" }, { "p0", "a1" }, { "p1", "p0", "assistant" },
  { "r0", "p1" }, { "r1", "r0", "assistant" },
})
vim.cmd("normal! zR")
vim.fn.writefile({ entry("s0", "p1"), vim.json.encode({ type = "custom", id = "m1", parentId = "r1",
  timestamp = "2026-12-01T10:00:02.000Z", customType = "pi-lsp.leaf", data = { targetId = "r1" } }) }, flat_path, "a")
H.wait(function()
  return H.entry(flat_buf, "s0") ~= nil
end, "the new branch did not show", flat_buf)
H.check(vim.fn.foldclosed(H.entry(flat_buf, "r1")) == -1 and vim.fn.foldclosed(H.entry(flat_buf, "p0")) == -1,
  "the path's branch was folded, hiding the leaf", flat_buf)

-- Folds opened without the mapped zo: a search opens one and moves the cursor onto its first
-- row (not the "more" line), and the cursor's move fetches its rows; zr is mapped.
local opened_buf = open_session("opened-otherwise", { { "s0" }, { "t0", "s0" }, { "t1", "t0", "assistant" },
  { "t2", "t1" }, { "u0", "s0" }, { "u1", "u0", "assistant" }, { "s1", "s0" } })
H.check(vim.fn.foldclosed(H.entry(opened_buf, "t0")) ~= -1 and H.entry(opened_buf, "t1") == nil, "t0 folded, its rows not fetched", opened_buf)
-- (As typed: 'foldopen' applies to keys typed, not to :normal's.)
vim.api.nvim_feedkeys(vim.keycode("gg/\\<t0\\><CR>"), "tx", false)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(opened_buf, "t0") and vim.fn.foldclosed(H.entry(opened_buf, "t0")) == -1,
  "the search opened t0's fold and left the cursor on its first row", opened_buf)
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = opened_buf })
H.wait(function()
  return H.entry(opened_buf, "t2") ~= nil
end, "the rows of a fold a search opened did not come", opened_buf)
H.check(vim.fn.foldclosed(H.entry(opened_buf, "u0")) ~= -1 and H.entry(opened_buf, "u1") == nil, "u0 still folded", opened_buf)
H.keys("zr")
H.wait(function()
  return H.entry(opened_buf, "u1") ~= nil
end, "the rows of the folds zr opened did not come", opened_buf)

-- The tree in two windows: a draw keeps each one's folds, and the other one's cursor on its entry
-- as rows come in above it.
local two_buf, two_path = open_session("two-windows", { { "s0" }, { "a0", "s0" }, { "a1", "a0", "assistant" },
  { "b0", "s0" }, { "b1", "b0", "assistant" }, { "s1", "s0" }, { "s2", "s1", "assistant" }, { "s3", "s2" } })
local win_a = vim.api.nvim_get_current_win()
vim.cmd("belowright split")
local win_b = vim.api.nvim_get_current_win()
vim.api.nvim_win_set_cursor(win_b, { H.entry(two_buf, "a0"), 0 })
H.keys("zo")
H.wait(function()
  return H.entry(two_buf, "a1") ~= nil
end, "a0's rows did not come", two_buf)
vim.api.nvim_win_set_cursor(win_b, { H.entry(two_buf, "s3"), 0 })
vim.api.nvim_set_current_win(win_a)
H.wait(function()
  return T.view(two_buf).win == win_a
end, "the first window is not the one last in", two_buf)
local function folds_in(win)
  return vim.api.nvim_win_call(win, function()
    return { a0 = vim.fn.foldclosed(H.entry(two_buf, "a0")) ~= -1, b0 = vim.fn.foldclosed(H.entry(two_buf, "b0")) ~= -1 }
  end)
end
H.check(vim.deep_equal(folds_in(win_a), { a0 = true, b0 = true }) and vim.deep_equal(folds_in(win_b), { a0 = false, b0 = true }),
  "the folds to start from: " .. vim.inspect({ folds_in(win_a), folds_in(win_b) }), two_buf)
-- An older branch under s0 (another writer's, who then moves the leaf back): a row above both
-- windows' cursors.
vim.fn.writefile({ vim.json.encode({ type = "message", id = "c0", parentId = "s0", timestamp = "2026-12-01T09:00:00.000Z",
  message = { role = "user", content = "prompt c0", timestamp = 1796119201000 } }), vim.json.encode({ type = "custom", id = "m3",
  parentId = "s3", timestamp = "2026-12-01T10:00:02.000Z", customType = "pi-lsp.leaf", data = { targetId = "s3" } }) }, two_path, "a")
H.wait(function()
  return H.entry(two_buf, "c0") ~= nil
end, "the new branch did not show", two_buf)
H.check(vim.deep_equal(folds_in(win_a), { a0 = true, b0 = true }) and vim.deep_equal(folds_in(win_b), { a0 = false, b0 = true }),
  "a draw changed a window's folds: " .. vim.inspect({ folds_in(win_a), folds_in(win_b) }), two_buf)
H.check(vim.api.nvim_win_get_cursor(win_b)[1] == H.entry(two_buf, "s3"), "the other window's cursor left s3", two_buf)
-- The other window closed as the lines change (by an autocmd): the draw goes on in this one.
vim.api.nvim_win_set_cursor(win_a, { H.entry(two_buf, "s2"), 0 })
vim.api.nvim_create_autocmd("OptionSet", { pattern = "modifiable", once = true, callback = function()
  vim.api.nvim_win_close(win_b, true)
end })
vim.fn.writefile({ vim.json.encode({ type = "message", id = "c1", parentId = "c0", timestamp = "2026-12-01T10:00:03.000Z",
  message = { role = "assistant", content = { { type = "text", text = "answer c1" } }, api = "anthropic-messages",
    provider = "anthropic", model = "claude-sonnet-4-5", usage = { input = 1, output = 1, cacheRead = 0, cacheWrite = 0,
      totalTokens = 2, cost = { input = 0, output = 0, cacheRead = 0, cacheWrite = 0, total = 0 } },
    stopReason = "stop", timestamp = 1796119201000 } }), vim.json.encode({ type = "custom", id = "m4", parentId = "s3",
  timestamp = "2026-12-01T10:00:04.000Z", customType = "pi-lsp.leaf", data = { targetId = "s3" } }) }, two_path, "a")
H.wait(function()
  return T.view(two_buf).by_id.c0.hidden == 1 and not vim.api.nvim_win_is_valid(win_b)
end, "the draw with a window closed meanwhile did not come", two_buf)
H.check(vim.deep_equal(folds_in(win_a), { a0 = true, b0 = true }) and vim.api.nvim_win_get_cursor(win_a)[1] == H.entry(two_buf, "s2"),
  "the draw stopped at the closed window: " .. vim.inspect(folds_in(win_a)), two_buf)
-- Or closed as the folds are read, before the lines change.
vim.cmd("belowright split")
local win_c = vim.api.nvim_get_current_win()
vim.api.nvim_set_current_win(win_a)
H.wait(function()
  return T.view(two_buf).win == win_a
end, "the first window is not the one last in", two_buf)
vim.api.nvim_create_autocmd("OptionSet", { pattern = "foldenable", once = true, callback = function()
  vim.api.nvim_win_close(win_c, true)
end })
local draws = T.view(two_buf).draws
T.view(two_buf).redraw()
H.wait(function()
  return T.view(two_buf).draws > draws and not vim.api.nvim_win_is_valid(win_c)
end, "the draw with a window closed as its folds were read did not come", two_buf)
-- Fetched again (a refresh), the rows held under a fold come back though it is open only in
-- another window.
vim.cmd("belowright split")
local win_d = vim.api.nvim_get_current_win()
vim.api.nvim_win_set_cursor(win_d, { H.entry(two_buf, "a0"), 0 })
H.keys("zo")
vim.api.nvim_set_current_win(win_a)
H.wait(function()
  return T.view(two_buf).win == win_a
end, "the first window is not the one last in", two_buf)
H.check(folds_in(win_a).a0 and not folds_in(win_d).a0 and H.entry(two_buf, "a1") ~= nil, "a0 open in the other window only", two_buf)
fetch_again(two_buf, function()
  return H.entry(two_buf, "a1") ~= nil
end, "the rows held under a fold open in the other window did not come back")
vim.api.nvim_win_close(win_d, true)

-- A folded row whose page failed is asked for again at the next draw, not at every cursor move
-- or scroll.
local failing_buf = open_session("failing-page", { { "s0" }, { "t0", "s0" }, { "t1", "t0", "assistant" }, { "s1", "s0" } })
local exec_real, failures = client.exec, 0
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.under then
    failures = failures + 1
    return callback({ message = "a stand-in failure" })
  end
  return exec_real(command, args, callback, ...)
end
vim.api.nvim_win_set_cursor(0, { H.entry(failing_buf, "t0"), 0 })
H.keys("zo")
for _ = 1, 3 do
  vim.api.nvim_exec_autocmds("CursorMoved", { buffer = failing_buf })
  vim.api.nvim_exec_autocmds("WinScrolled", { pattern = tostring(vim.api.nvim_get_current_win()) })
end
H.check(failures == 1, "asked " .. failures .. " times", failing_buf)
T.view(failing_buf).redraw()
H.wait(function()
  return failures >= 2
end, "the row was not asked for again at the next draw", failing_buf)
-- A fold key asks again too.
client.exec = exec_real
H.keys("zc")
H.keys("zo")
H.wait(function()
  return H.entry(failing_buf, "t1") ~= nil
end, "the row was not asked for again at zo", failing_buf)
-- A page asked for before a draw and found stale after it (the draw met it on its way, so
-- asked for nothing): the row is asked for again at the next cursor move.
local stale_buf, stale_path = open_session("stale-page", { { "s0" }, { "t0", "s0" }, { "t1", "t0", "assistant" }, { "s1", "s0" } })
local held_page
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.under == "t0" and not held_page then
    held_page = callback
    return
  end
  return exec_real(command, args, callback, ...)
end
vim.api.nvim_win_set_cursor(0, { H.entry(stale_buf, "t0"), 0 })
H.keys("zo")
H.check(held_page ~= nil, "t0's page was not asked for", stale_buf)
vim.fn.writefile({ entry("t2", "t1"), vim.json.encode({ type = "custom", id = "m1", parentId = "s1",
  timestamp = "2026-12-01T10:00:02.000Z", customType = "pi-lsp.leaf", data = { targetId = "s1" } }) }, stale_path, "a")
H.wait(function()
  return T.view(stale_buf).by_id.t0.hidden == 2
end, "the change did not draw", stale_buf)
held_page(nil, { under = "t0", start = 0, total = 1, rows = 1, nodes = {} })
H.wait(function()
  return H.entry(stale_buf, "t2") ~= nil
end, "the row whose stale page came after a draw was not asked for again", stale_buf)
client.exec = exec_real
-- A page that fails after a draw that met it on its way: not asked for again at once (the server
-- may have stopped: asking would start it again, past the limit on restarts).
local held_error, asked_after = nil, 0
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.under == "t0" then
    asked_after = asked_after + 1
    held_error = held_error or callback
    return
  end
  return exec_real(command, args, callback, ...)
end
fetch_again(stale_buf, function()
  return held_error ~= nil
end, "t0's rows were not asked for after the refresh")
T.view(stale_buf).redraw()
local draws_now = T.view(stale_buf).draws
H.wait(function()
  return T.view(stale_buf).draws > draws_now
end, "no draw", stale_buf)
held_error({ message = "the pi-lsp server stopped" })
H.check(asked_after == 1, "asked again at once: " .. asked_after, stale_buf)
client.exec = exec_real
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = stale_buf })
H.wait(function()
  return H.entry(stale_buf, "t2") ~= nil
end, "the rows did not come at the next cursor move", stale_buf)
-- The cursor on a row fetched under a fold when the tree is fetched again (a label, a refresh):
-- it waits on the fold's row, and goes back to its row when the rows come; not when the fold
-- was closed meanwhile, nor once the cursor left that row.
local held_pages = {}
local function hold_pages()
  client.exec = function(command, args, callback, ...)
    if command == "pi.getTree" and args.under == "t0" then
      held_pages[#held_pages + 1] = function()
        exec_real(command, args, callback)
      end
      return
    end
    return exec_real(command, args, callback, ...)
  end
end
local function refetched(check)
  vim.api.nvim_win_set_cursor(0, { H.entry(stale_buf, "t2"), 0 })
  held_pages = {}
  hold_pages()
  fetch_again(stale_buf, function()
    return #held_pages > 0
  end, "t0's rows were not asked for after the refresh")
  H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(stale_buf, "t0"), "the cursor does not wait on t0", stale_buf)
  check()
  client.exec = exec_real
  held_pages[1]()
  H.wait(function()
    return H.entry(stale_buf, "t2") ~= nil
  end, "the rows did not come back", stale_buf)
end
refetched(function() end)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(stale_buf, "t2"), "the cursor did not go back to t2", stale_buf)
refetched(function()
  H.keys("zc")
end)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(stale_buf, "t0") and vim.fn.foldclosed(H.entry(stale_buf, "t0")) == H.entry(stale_buf, "t0"),
  "the cursor went into the fold closed meanwhile", stale_buf)
H.keys("zo")
refetched(function()
  vim.api.nvim_win_set_cursor(0, { H.entry(stale_buf, "s1"), 0 })
  vim.api.nvim_exec_autocmds("CursorMoved", { buffer = stale_buf })
  vim.api.nvim_win_set_cursor(0, { H.entry(stale_buf, "t0"), 0 })
  vim.api.nvim_exec_autocmds("CursorMoved", { buffer = stale_buf })
end)
H.check(vim.api.nvim_win_get_cursor(0)[1] == H.entry(stale_buf, "t0"), "the cursor was pulled back to t2 after it left t0", stale_buf)
-- Shown in a window without BufWinEnter (:noautocmd), with its own folding: a draw folds there
-- too (a new branch off the path starts folded).
vim.cmd("botright new")
vim.wo.foldmethod = "manual"
vim.cmd("noautocmd buffer " .. stale_buf)
local manual_win = vim.api.nvim_get_current_win()
H.check(vim.wo[manual_win].foldmethod == "manual", "the window took the tree's folding", stale_buf)
vim.fn.writefile({ entry("u0", "s0"), entry("u1", "u0", "assistant"), vim.json.encode({ type = "custom", id = "m2",
  parentId = "s1", timestamp = "2026-12-01T10:00:03.000Z", customType = "pi-lsp.leaf", data = { targetId = "s1" } }) }, stale_path, "a")
H.wait(function()
  return H.entry(stale_buf, "u0") ~= nil
end, "the new branch did not show", stale_buf)
H.check(vim.fn.foldclosed(H.entry(stale_buf, "u0")) == H.entry(stale_buf, "u0"), "the new branch is not folded in that window", stale_buf)
vim.api.nvim_win_close(manual_win, true)
-- In a second window on the tree, its cursor waits too, for its own row, while the first one's
-- stays where it is.
vim.cmd("belowright split")
local below = vim.api.nvim_get_current_win()
vim.api.nvim_win_set_cursor(below, { H.entry(stale_buf, "t2"), 0 })
vim.cmd("wincmd p")
local above = vim.api.nvim_get_current_win()
vim.api.nvim_win_set_cursor(above, { H.entry(stale_buf, "s1"), 0 })
held_pages = {}
hold_pages()
fetch_again(stale_buf, function()
  return #held_pages > 0
end, "t0's rows were not asked for after the refresh")
H.check(vim.api.nvim_win_get_cursor(below)[1] == H.entry(stale_buf, "t0"), "the second window's cursor does not wait on t0", stale_buf)
client.exec = exec_real
held_pages[1]()
H.wait(function()
  return H.entry(stale_buf, "t2") ~= nil
end, "the rows did not come back", stale_buf)
H.check(vim.api.nvim_win_get_cursor(below)[1] == H.entry(stale_buf, "t2"), "the second window's cursor did not go back to t2", stale_buf)
H.check(vim.api.nvim_win_get_cursor(above)[1] == H.entry(stale_buf, "s1"), "the first window's cursor left s1", stale_buf)
vim.api.nvim_win_close(below, true)

-- With bookkeeping rows shown, a change is patched in too: the tree is not fetched again.
tree_options.show_bookkeeping = true
local kept_buf, kept_path = open_session("bookkeeping", { { "k0" }, { "k1", "k0", "assistant" } })
local fetched, exec_kept = 0, client.exec
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and not args.under and not args.after then
    fetched = fetched + 1
  end
  return exec_kept(command, args, callback, ...)
end
vim.fn.writefile({ entry("k2", "k1"), vim.json.encode({ type = "custom", id = "m5", parentId = "k2",
  timestamp = "2026-12-01T10:00:02.000Z", customType = "pi-lsp.leaf", data = { targetId = "k2" } }) }, kept_path, "a")
H.wait(function()
  return H.entry(kept_buf, "m5") ~= nil
end, "the change did not show with its leaf move", kept_buf)
client.exec = exec_kept
tree_options.show_bookkeeping = false
H.check(fetched == 0, "the tree was fetched again " .. fetched .. " times", kept_buf)
-- The option turned off while the tree is open: the next change fetches the tree of the new
-- kind (patched, it kept the rows the option no longer shows).
vim.fn.writefile({ entry("k3", "k2", "assistant"), vim.json.encode({ type = "custom", id = "m6", parentId = "k3",
  timestamp = "2026-12-01T10:00:03.000Z", customType = "pi-lsp.leaf", data = { targetId = "k3" } }) }, kept_path, "a")
H.wait(function()
  return H.entry(kept_buf, "k3") ~= nil
end, "the change did not show", kept_buf)
H.check(H.entry(kept_buf, "m5") == nil and H.entry(kept_buf, "m6") == nil, "leaf moves still shown with the option off", kept_buf)

-- The cursor on no entry stays on its line through a draw: on the header as a change comes, on
-- "… N earlier rows" as they come. (It went to the leaf.)
local chain = { { "e0" } }
for n = 1, 304 do
  chain[#chain + 1] = { "e" .. n, "e" .. (n - 1), n % 2 == 1 and "assistant" or nil }
  if n == 300 then -- a branch off the path, near its end
    chain[#chain + 1] = { "g0", "e300" }
    chain[#chain + 1] = { "g1", "g0", "assistant" }
  end
end
local chain_buf, chain_path = open_session("kept-line", chain)
vim.api.nvim_win_set_cursor(0, { 1, 0 })
vim.fn.writefile({ entry("e305", "e304") }, chain_path, "a")
H.wait(function()
  return H.entry(chain_buf, "e305") ~= nil
end, "the change did not show", chain_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == 1, "the cursor left the header", chain_buf)
H.check(H.lines(chain_buf)[3]:find("earlier rows", 1, true), "no earlier rows line", chain_buf)
vim.api.nvim_win_set_cursor(0, { 3, 0 })
-- An action there says the line is a fold (it said "no entry on this line", on a line of rows).
local fold_line = vim.trim(H.lines(chain_buf)[3])
for _, key in ipairs({ "b", "p", "d" }) do
  H.messages = {}
  H.keys(key)
  H.check(H.said(('"%s" is a fold, not an entry: with the cursor on it its rows are fetched; act on one of them')
    :format(fold_line)), key .. " on the fold line: " .. table.concat(H.messages, " | "))
end
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = chain_buf })
H.wait(function()
  return not H.contains(chain_buf, "earlier rows")
end, "the earlier rows did not come", chain_buf)
H.check(vim.api.nvim_win_get_cursor(0)[1] == 3, "the cursor left the line of the earlier rows", chain_buf)
-- :edit draws the tree again with the folds and the cursor's entry as they were just before.
vim.api.nvim_win_set_cursor(0, { H.entry(chain_buf, "g0"), 0 })
H.keys("zo")
H.wait(function()
  return H.entry(chain_buf, "g1") ~= nil
end, "g0's rows did not come", chain_buf)
vim.cmd("normal! zc")
vim.api.nvim_win_set_cursor(0, { H.entry(chain_buf, "e302"), 0 })
vim.cmd("edit")
H.check(vim.fn.foldclosed(H.entry(chain_buf, "g0")) == H.entry(chain_buf, "g0") and vim.api.nvim_win_get_cursor(0)[1] == H.entry(chain_buf, "e302"),
  ":edit lost the fold closed or the cursor's entry", chain_buf)
vim.api.nvim_win_set_cursor(0, { 2, 0 })
vim.cmd("edit")
H.check(vim.api.nvim_win_get_cursor(0)[1] == 2, ":edit moved the cursor off the hint line", chain_buf)

-- A page of branches asked for at the cursor, found stale after a draw that met it on its way:
-- asked for again at once (the cursor stays on the line: no other move asks).
local few = { { "r0" } }
for n = 0, 301 do
  few[#few + 1] = { "b" .. n, "r0" }
end
few[#few + 1] = { "r1", "r0" }
local few_buf = open_session("stale-branches", few)
local held_branches, branch_pages = nil, 0
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.after then
    branch_pages = branch_pages + 1
    if not held_branches then
      held_branches = callback
      return
    end
  end
  return real_exec(command, args, callback, ...)
end
vim.api.nvim_win_set_cursor(0, { H.line_of(few_buf, "… 2 more branches"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = few_buf })
H.check(held_branches ~= nil, "the branches were not asked for", few_buf)
local few_draws = T.view(few_buf).draws
T.view(few_buf).redraw()
H.wait(function()
  return T.view(few_buf).draws > few_draws
end, "no draw", few_buf)
held_branches(nil, { after = "b299", start = 0, total = 99, rows = 99, nodes = {} })
H.wait(function()
  return H.entry(few_buf, "b301") ~= nil
end, "the stale page of branches was not asked for again", few_buf)
client.exec = real_exec

-- Two pages of branches held, and the first asked for again at a refresh comes stale: both pages
-- still come back.
local many = { { "r0" } }
for n = 0, 849 do
  many[#many + 1] = { "b" .. n, "r0" }
end
many[#many + 1] = { "r1", "r0" }
local many_buf = open_session("two-pages", many)
vim.api.nvim_win_set_cursor(0, { H.line_of(many_buf, "… 550 more branches"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = many_buf })
H.wait(function()
  return H.line_of(many_buf, "… 50 more branches")
end, "the first page of branches did not come", many_buf)
vim.api.nvim_win_set_cursor(0, { H.line_of(many_buf, "… 50 more branches"), 0 })
vim.api.nvim_exec_autocmds("CursorMoved", { buffer = many_buf })
H.wait(function()
  return H.entry(many_buf, "b849") ~= nil
end, "the second page of branches did not come", many_buf)
local stale_first = false
client.exec = function(command, args, callback, ...)
  if command == "pi.getTree" and args.after and not stale_first then
    stale_first = true
    return callback(nil, { after = args.after, start = 0, total = 999, rows = 999, nodes = {} })
  end
  return real_exec(command, args, callback, ...)
end
fetch_again(many_buf, function()
  return stale_first
end, "the branches were not asked for at the refresh")
client.exec = real_exec
T.view(many_buf).redraw()
H.wait(function()
  return H.entry(many_buf, "b849") ~= nil
end, "the second page of branches did not come back", many_buf)

-- The server dies: it is started again, and the open tree follows its session again.
local util = require("pi_lsp.util")
local stops, starts = 0, 0
util.on("stopped", function()
  stops = stops + 1
end)
util.on("initialized", function()
  starts = starts + 1
end)
local started_before_kill = 0
local function kill_server()
  local before = stops
  started_before_kill = starts
  for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    vim.uv.kill(pid, "sigkill")
  end
  H.wait(function()
    return stops > before
  end, "the server did not stop")
end
local crash_buf, crashed = open_session("after-crash", { { "k0" }, { "k1", "k0", "assistant" } })
kill_server()
vim.fn.writefile({ entry("k2", "k1") }, crashed, "a")
H.wait(function()
  return H.entry(crash_buf, "k2") ~= nil
end, "the tree did not follow its session after the server started again", crash_buf)
-- A server that keeps crashing is left stopped after three restarts in three minutes.
-- Each is killed once it is initialized (only a server that was up counts as crashed): a
-- client merely listed could still be starting, and its kill went uncounted under load.
for _ = 1, 3 do
  H.wait(function()
    return starts > started_before_kill
  end, "the server was not started again")
  kill_server()
end
H.wait(function()
  return H.said(("the server for %s stopped 4 times in 3 minutes; the next command starts it again"):format(vim.fn.getcwd()))
end, "no word that the server is left stopped: " .. table.concat(H.messages, " | "))
H.check(#vim.lsp.get_clients({ name = "pi_lsp", _uninitialized = true }) == 0, "the server was started again")

H.finish()
