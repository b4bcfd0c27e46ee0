-- :PiTree — the session tree in a buffer, drawn from the rows the server lays
-- out (a chain stays at one depth, only forks indent, as `pi-lsp tree` prints
-- it); every fork's branch is a fold. `*` marks the current path, `← leaf` the leaf. Re-rendered on
-- pi/sessionChanged; every action is one server command. The tree comes folded (the path's last
-- rows, each branch off it one row): a folded row's rows are fetched when its fold opens or the
-- cursor reaches its "… N more rows" line, earlier rows when the cursor reaches "… N earlier rows",
-- the branches a fork with very many left out when it reaches "… N more branches".
local client = require("pi_lsp.client")
local config = require("pi_lsp.config")
local session = require("pi_lsp.session")
local util = require("pi_lsp.util")

local M = {}

local ns = vim.api.nvim_create_namespace("pi_lsp_tree")
local views = {} -- buf -> {uri, root, nodes, by_id, leaf, line_ids, ids_line, rendered}
local HEADER_LINES = 2
local PATH_ROWS = 300 -- rows of the current path asked for at first, and added by "earlier"
local PAGE_ROWS = 500 -- rows fetched under a folded row at a time

-- Every key's action: its hint on the tree's second line, and what `?` says.
local HELP = {
  { "branch", "branch", "branch here (offers to restore the files)" },
  { "branch_summary", "summary", "branch here with a summary of the branch left" },
  { "label", "label", "label the entry" },
  { "fork", "fork", "fork into a new session" },
  { "preview", "preview", "preview the context at the entry" },
  { "diff", "diff", "diff the context against the leaf" },
  { "edit", "edit", "edit this prompt (into the chat input)" },
  { "restore_files", "restore", "restore the files to the entry (diff first)" },
  { "undo_restore", "undo", "undo the last restore of files" },
  { "chat", "chat", "open the chat" },
  { "refresh", "refresh", "refresh" },
  { "close", "close", "close the tree" },
  { "help", "keys", "list the keys" },
}

local function first_key(value)
  return type(value) == "table" and value[1] or value
end

--- The hint line: the keys, as many as fit in `width` cells, and always `?`
--- (which lists them all).
function M.help_line(width)
  local keys = config.options.tree.keys
  local parts, last = {}, nil
  for _, item in ipairs(HELP) do
    local key = first_key(keys[item[1]])
    if key and item[1] == "help" then
      last = key .. " " .. item[2]
    elseif key then
      parts[#parts + 1] = key .. " " .. item[2]
    end
  end
  local function line(list)
    return '" ' .. table.concat(list, " · ")
  end
  local shown = {}
  for _, part in ipairs(parts) do
    if width and vim.fn.strdisplaywidth(line(vim.list_extend({ unpack(shown) }, { part, last }))) > width then
      break
    end
    shown[#shown + 1] = part
  end
  shown[#shown + 1] = last
  return line(shown)
end

-- -- drawing the server's layout -------------------------------------------------------------

--- `text` cut to `cells` screen cells, with "…" where it was cut.
local function clip(text, cells)
  if vim.fn.strdisplaywidth(text) <= cells then
    return text
  end
  local out, used = {}, 0
  for char in text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    used = used + vim.fn.strdisplaywidth(char)
    if used > cells - 1 then
      break
    end
    out[#out + 1] = char
  end
  return table.concat(out) .. "…"
end

--- One entry's line. Wider than `width` cells, the preview is shortened: the
--- id, the label and the leaf mark are never cut. Ids, labels and previews are made one line
--- before they are measured: vim.fn takes a string holding NUL for a Blob (E976).
local function node_line(node, leaf, width, base)
  local indent = ("  "):rep(math.max(0, node.depth - (base or 0)))
  if node.more then
    if node.after then
      return ("%s… %d more branch%s"):format(indent, node.count, node.count == 1 and "" or "es")
    end
    return ("%s… %d %s row%s"):format(indent, node.count, node.under and "more" or "earlier",
      node.count == 1 and "" or "s")
  end
  local mark = node.onPath and "*" or " "
  local kind = util.one_line(node.role or node.type)
  local head = ("%s%s%s %s %s: "):format(indent, node.head and "├─ " or "", mark, util.one_line(node.id), kind)
  local tail = ""
  if node.label and node.label ~= "" then
    tail = tail .. "  [" .. util.one_line(node.label) .. "]"
  end
  if node.id == leaf then
    tail = tail .. "  ← leaf"
  end
  local preview = util.one_line(node.preview or "")
  -- Byte length bounds the display width of these lines, so most skip measuring.
  if width and #head + #preview + #tail > width then
    local room = width - vim.fn.strdisplaywidth(head) - vim.fn.strdisplaywidth(tail)
    preview = room > 1 and clip(preview, room) or ""
  end
  return head .. preview .. tail
end

--- Whether rows fetched under a folded row (`fetched`: {total, depth, head, rows}) still
--- belong under `node`: the server places them from the row's depth, and counts them.
local function still_under(fetched, node)
  return fetched and fetched.total == node.hidden and fetched.depth == node.depth and fetched.head == node.head
end

--- The rows to draw: `tree`'s, each folded row followed by the rows fetched
--- under it (`unfolded[id]`, while still_under) and a "… N more rows" row for the
--- rest, the last branch sent of a fork with more followed by those fetched
--- (`branches[id]`, each in turn unfolded) and a "… N more branches" row for the
--- rest; "… N earlier rows" first when the path was cut.
function M.unfold(tree, unfolded, branches)
  local nodes = {}
  if (tree.earlier or 0) > 0 then
    nodes[1] = { more = true, count = tree.earlier, depth = 0 }
  end
  local function add(node)
    nodes[#nodes + 1] = node
    local hidden = node.hidden or 0
    if hidden > 0 then
      local fetched = unfolded and unfolded[node.id]
      local rows = still_under(fetched, node) and fetched.rows or {}
      vim.list_extend(nodes, rows)
      if #rows < hidden then
        nodes[#nodes + 1] = { more = true, under = node.id, start = #rows, count = hidden - #rows, depth = node.depth + 1 }
      end
    end
    local more = node.moreBranches or 0
    if more > 0 then
      local fetched = branches and branches[node.id]
      -- Counted the same (branches and their rows) and placed the same, they are still the
      -- branches after this one.
      local same = fetched and fetched.total == more and fetched.made == node.moreRows
        and fetched.depth == node.depth and fetched.head == node.head
      local rows = same and fetched.rows or {}
      for _, row in ipairs(rows) do
        add(row)
      end
      if #rows < more then
        nodes[#nodes + 1] = { more = true, after = node.id, start = #rows, count = more - #rows, depth = node.depth }
      end
    end
  end
  for _, node in ipairs(tree.nodes or {}) do
    add(node)
  end
  return vim.tbl_extend("force", tree, { nodes = nodes })
end

--- Lines, the entry id of each line, and fold ranges for a pi.getTree result,
--- lines made to fit `width` cells when given. The server lays the rows out
--- (session/layout.py): each row's depth and whether it starts a branch.
--- "More" rows (M.unfold) have no id; the fifth result maps their lines to them.
function M.layout(tree, width)
  local nodes = tree.nodes or {}
  local by_id = {}
  for _, node in ipairs(nodes) do
    if not node.more then
      by_id[node.id] = node
    end
  end
  local lines, ids, folds, more = {}, {}, {}, {}
  -- Indented from the shallowest row drawn: the end of a long path can be forks deep.
  local base = math.huge
  for _, node in ipairs(nodes) do
    base = node.more and base or math.min(base, node.depth)
  end
  base = base == math.huge and 0 or base
  local open = {} -- folds not yet closed, deepest last: {first line, depth}
  local function close_to(depth, last)
    while #open > 0 and open[#open][2] >= depth do
      local fold = table.remove(open)
      folds[#folds + 1] = { fold[1], last, fold[2] }
    end
  end
  for lnum, node in ipairs(nodes) do
    if node.head or node.after or node.under then
      -- A branch's fold runs until the next branch at its depth or shallower (or a row that
      -- stands for more rows or branches, which no deeper branch's fold hides).
      close_to(node.depth - base + 1, lnum - 1)
    end
    if node.head then
      open[#open + 1] = { lnum, node.depth - base + 1 }
    end
    lines[lnum] = node_line(node, tree.leafRow, width, base)
    if node.more then
      more[lnum] = node
    else
      ids[lnum] = node.id
    end
  end
  close_to(1, #lines)
  if width then
    -- Closed, a fold shows its first line and "… N more lines": that line leaves room for it.
    for _, fold in ipairs(folds) do
      local node = by_id[ids[fold[1]]]
      lines[fold[1]] = node_line(node, tree.leafRow, width - vim.fn.strdisplaywidth(util.fold_marker(fold[2] - fold[1])), base)
    end
  end
  return lines, ids, folds, by_id, more
end

--- The tree after a pi/sessionChanged change (`delta`: rows replaced from
--- `start`), or nil when it does not apply to `tree` (another version).
function M.patch(tree, delta)
  if not (tree and delta and tree.version == delta.base) then
    return nil
  end
  local nodes = {}
  for i = 1, delta.start do
    nodes[i] = tree.nodes[i]
  end
  vim.list_extend(nodes, delta.rows)
  for i = delta.start + delta.delete + 1, #tree.nodes do
    nodes[#nodes + 1] = tree.nodes[i]
  end
  return {
    version = delta.version,
    leafId = delta.leafId,
    leafRow = delta.leafRow,
    title = delta.title,
    entries = delta.entries,
    earlier = delta.earlier,
    nodes = nodes,
  }
end

-- -- rendering ---------------------------------------------------------------------------------

local function highlight(buf, lines, ids, view)
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local help = vim.api.nvim_buf_get_lines(buf, 1, 2, false)[1] or ""
  vim.api.nvim_buf_set_extmark(buf, ns, 1, 0, { end_col = #help, hl_group = "Comment" })
  for lnum, id in pairs(ids) do
    local node = view.by_id[id]
    local row = lnum - 1 + HEADER_LINES
    local line = lines[lnum]
    local shown = util.one_line(id) -- as node_line writes it
    local id_col = line:find(shown, 1, true)
    if id_col then
      vim.api.nvim_buf_set_extmark(buf, ns, row, id_col - 1, { end_col = id_col - 1 + #shown, hl_group = "PiTreeId" })
    end
    if node.onPath and id_col and id_col > 2 then
      vim.api.nvim_buf_set_extmark(buf, ns, row, id_col - 3, { end_col = id_col - 2, hl_group = "PiTreePath" })
    end
    local label = node.label and util.one_line(node.label)
    local label_col = label and line:find("[" .. label .. "]", 1, true)
    if label_col then
      vim.api.nvim_buf_set_extmark(buf, ns, row, label_col - 1, { end_col = label_col + #label + 1, hl_group = "PiTreeLabel" })
    end
    if id == view.leaf_row then
      vim.api.nvim_buf_set_extmark(buf, ns, row, 0, { end_col = #line, hl_group = "PiTreeLeaf" })
    end
  end
end

--- Whether `win` shows `buf` to the user (not the hidden window autocmds of bufload() run in).
local function shows(win, buf)
  return win ~= nil and win ~= -1 and vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == buf
    and vim.fn.win_gettype(win) ~= "autocmd"
end

--- The window showing the tree `buf`: the one last drawn or entered while it does (in any tab
--- page), else the first one found; -1 when none does.
local function tree_win(buf)
  local last = views[buf] and views[buf].win
  if shows(last, buf) then
    return last
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if shows(win, buf) then
      return win
    end
  end
  return -1
end

--- Run `fn` in `win` with folding on (under zn no fold shows shut, yet each keeps its state;
--- zx turns it on), then put the window's 'foldenable' back.
local function with_folding(win, fn)
  local enabled = vim.wo[win].foldenable
  util.set_local(win, { foldenable = true })
  vim.api.nvim_win_call(win, fn)
  util.set_local(win, { foldenable = enabled })
end

--- Whether each branch fold drawn is closed, by the entry id it starts at (false for
--- every other row drawn: a row that starts a fold when drawn again shows open). A fold
--- hidden in a closed one, or not drawn (its rows fetched again), keeps what it was: the
--- window cannot tell. Read in `win`, over what it had (new to the tree: what the window last
--- in had); nil when it shows the tree no more.
local function closed_folds(buf, view, win)
  if not shows(win, buf) or not view.line_ids then
    return nil
  end
  local before = view.closed_in[win] or view.closed or {}
  local closed = vim.tbl_extend("force", {}, before)
  for id in pairs(view.ids_line) do
    closed[id] = false
  end
  with_folding(win, function()
    for _, fold in ipairs(view.folds or {}) do
      local row, id = fold[1] + HEADER_LINES, view.line_ids[fold[1]]
      local shut = vim.fn.foldclosed(row)
      -- One line never shows shut, and one inside a shut fold cannot tell: both keep theirs.
      if fold[2] > fold[1] and (shut == -1 or shut == row) then
        closed[id] = shut == row
      else
        closed[id] = before[id]
      end
    end
  end)
  return closed
end

--- Set the folds of `win` as `closed` has them (those not in it as configured), over the
--- window's own 'foldlevel' and 'foldenable' (so zM, zm, zr and zn hold through a draw).
local function restore_folds(win, view, folds, closed)
  local function shut(fold)
    local id = view.line_ids[fold[1]]
    local close = closed and closed[id]
    if close == nil then -- a row not drawn before (a branch fetched or new) starts as configured
      close = config.options.tree.fold_off_path and not view.by_id[id].onPath
    end
    return close
  end
  with_folding(win, function()
    vim.cmd("normal! zx") -- the folds from the new levels, open or shut by 'foldlevel'
    -- Outermost first: a line's foldopen opens the outermost shut fold around it, so each
    -- open one is reached through those around it (opened here, shut again below).
    table.sort(folds, function(a, b)
      return a[3] < b[3]
    end)
    for _, fold in ipairs(folds) do
      local row = fold[1] + HEADER_LINES
      if not shut(fold) then
        for _ = 0, fold[3] do
          if vim.fn.foldclosed(row) == -1 then
            break
          end
          vim.cmd(("%dfoldopen"):format(row))
        end
        if fold[2] == fold[1] then -- one line never shows shut, but may be, under zx
          pcall(vim.cmd, ("%dfoldopen"):format(row))
        end
      end
    end
    -- Deepest first, so closing an outer fold does not hide an inner one's line. Closing a
    -- fold shut already (one line, which never shows shut, may be) closes the one around it.
    for n = #folds, 1, -1 do
      local fold = folds[n]
      local row = fold[1] + HEADER_LINES
      if shut(fold) and fold[2] > fold[1] and vim.fn.foldclosed(row) == -1 then
        vim.cmd(("%dfoldclose"):format(row))
      end
    end
  end)
end

--- The text width of the window showing `buf`, or nil if none shows it.
local function text_width(buf)
  local win = tree_win(buf)
  if win == -1 then
    return nil
  end
  return vim.api.nvim_win_get_width(win) - vim.fn.getwininfo(win)[1].textoff
end

local fetch_shown -- below: it draws, and drawing calls it

--- Where the cursor of `win` is on the tree `buf`: its line, the entry there and the "more"
--- row of rows or branches there (not "earlier" rows: the row that follows them is again one);
--- nil when `win` does not show the tree.
local function cursor_at(buf, view, win)
  if not shows(win, buf) then
    return nil
  end
  local line = vim.api.nvim_win_get_cursor(win)[1]
  local more = view.more and view.more[line - HEADER_LINES]
  return { line = line, id = view.line_ids and view.line_ids[line - HEADER_LINES],
    more = more and (more.under or more.after) and more or nil }
end

--- Where the cursor goes that was on the "more" row `row`: the first row it fetched, or the
--- same "more" row while those have not come.
local function line_after_more(view, row)
  local held = (row.under and view.unfolded or view.branches)[row.under or row.after]
  local first = held and held.rows[row.start + 1]
  if first and view.ids_line[first.id] then
    return view.ids_line[first.id]
  end
  for lnum, other in pairs(view.more) do
    if other.under == row.under and other.after == row.after then
      return lnum + HEADER_LINES
    end
  end
  return nil
end

--- The drawn row whose rows, held and being fetched again, held `id` (the first drawn one up:
--- the rows of a fold may be held under another's); nil when none did.
local function held_under(view, id)
  local seen = {}
  while id and not view.ids_line[id] and not seen[id] do
    seen[id] = true
    local holder
    for _, kind in pairs(view.reopen or {}) do
      for under, held in pairs(kind) do
        for _, node in ipairs(type(held) == "table" and held.rows or {}) do
          holder = node.id == id and under or holder
        end
      end
    end
    id = holder
  end
  return id and view.ids_line[id] and id or nil
end

--- The line of the entry the cursor of `win` was on (`id`) as drawn now. An entry among rows
--- fetched again (after a label, a refresh) is waited for on the row they fold under, while
--- the cursor stays there (each window's for its own); nil when it is drawn nowhere.
local function entry_line(view, win, id)
  local pending = view.pending_cursor[win]
  view.pending_cursor[win] = nil
  if pending and id == pending.at then
    local line = view.ids_line[pending.id]
    if not line then
      view.pending_cursor[win] = pending
    elseif vim.tbl_contains({ -1, line }, vim.api.nvim_win_call(win, function()
      return vim.fn.foldclosed(line)
    end)) then
      return line -- (not into a fold closed meanwhile; a closed fold shows its first line)
    end
  elseif id and not view.ids_line[id] then
    local under = held_under(view, id)
    if under then
      view.pending_cursor[win] = { id = id, at = under }
      return view.ids_line[under]
    end
  end
  return id and view.ids_line[id]
end

--- Draw `tree` in the buffer; `emptied`: where the cursor was when the lines were emptied
--- ({id = its entry, more = its "more" row, line}).
local function draw(buf, view, tree, emptied)
  if not vim.api.nvim_buf_is_loaded(buf) then
    view.tree = tree -- unloaded (:bdelete): loaded again, it is drawn from the tree as it is now
    return
  end
  local win, wins = tree_win(buf), vim.fn.win_findbuf(buf)
  local at = emptied or cursor_at(buf, view, win) or {}
  local cursor_id, on_more = at.id, at.more
  -- On no entry and no "more" line (the header, the hint, "… N earlier rows"): the same line.
  local kept = not cursor_id and not on_more and (emptied or view.rendered) and at.line
  -- Each window on the tree keeps its folds, and the others their cursor's entry; a draw in no
  -- window keeps what the last one saw.
  local closed_in, others = {}, {}
  for _, shown_in in ipairs(wins) do
    if shows(shown_in, buf) then -- (an autocmd may have closed it meanwhile)
      if util.has_folds(shown_in) then
        closed_in[shown_in] = view.rendered and closed_folds(buf, view, shown_in) or nil
      else -- shown without BufWinEnter (:noautocmd buffer): new to the tree
        util.use_folds(shown_in, 99)
      end
      local other = shown_in ~= win and cursor_at(buf, view, shown_in) -- (nil: closed as its folds were read)
      if other then
        others[shown_in] = other.id or false
      end
    end
  end
  view.closed, view.closed_in = closed_in[win] or view.closed, closed_in
  local lines, ids, folds, by_id, more = M.layout(M.unfold(tree, view.unfolded, view.branches), text_width(buf))
  view.tree, view.width, view.more = tree, text_width(buf), more
  view.failed, view.draws = {}, (view.draws or 0) + 1
  view.nodes, view.by_id, view.leaf, view.line_ids, view.folds = tree.nodes, by_id, tree.leafId, ids, folds
  view.leaf_row = tree.leafRow
  view.ids_line = {}
  for lnum, id in pairs(ids) do
    view.ids_line[id] = lnum + HEADER_LINES
  end
  -- Fold levels first: nvim reads them while the lines change.
  local shifted = {}
  for _, fold in ipairs(folds) do
    shifted[#shifted + 1] = { fold[1] + HEADER_LINES, fold[2] + HEADER_LINES, fold[3] }
  end
  util.set_folds(buf, shifted)
  -- The row marked "← leaf": a hidden leaf (a context edit last in the file) names no row.
  local header = util.one_line(("%s — %d entries, leaf %s"):format(tree.title, tree.entries, tree.leafRow or "(none)"))
  local all = { header, M.help_line(text_width(buf)) }
  vim.list_extend(all, lines)
  util.set_lines(buf, 0, -1, all)
  highlight(buf, lines, ids, view)
  for _, shown_in in ipairs(wins) do
    if shows(shown_in, buf) then -- (an autocmd may have closed it as the lines changed)
      restore_folds(shown_in, view, folds, closed_in[shown_in] or view.closed)
    end
  end
  win = shows(win, buf) and win or tree_win(buf)
  view.win = win
  -- Stay on the entry the cursor was on, or on what the "more" row it was on fetched; the
  -- first time, go to the leaf.
  local target = entry_line(view, win, cursor_id) or (on_more and line_after_more(view, on_more))
    or (kept and math.min(kept, vim.api.nvim_buf_line_count(buf))) or view.ids_line[tree.leafRow or ""]
  if win ~= -1 and target then
    vim.api.nvim_win_set_cursor(win, { target, 0 })
  end
  for other, id in pairs(others) do
    local line = id and shows(other, buf) and entry_line(view, other, id)
    if line then
      vim.api.nvim_win_set_cursor(other, { line, 0 })
    end
  end
  view.rendered = true
  if win ~= -1 then -- (in none: what is held waits for a window)
    fetch_shown(buf, "draw", wins)
  end
end

--- Fetch what a "more" row stands for: a longer path, or the next page of
--- rows under a folded row or of branches after one (kept while they still are).
local function fetch_more(buf, row)
  local view = views[buf]
  if not (row.under or row.after) then
    view.limit = view.limit + PATH_ROWS
    return view.refresh()
  end
  local kind, id = row.under and "under" or "after", row.under or row.after
  if view.fetching[kind][id] then
    return
  end
  -- A "more" row starts after the rows drawn: none when those held no longer fit (M.unfold).
  local held = row.start > 0 and (row.under and view.unfolded or view.branches)[id] or { rows = {} }
  view.fetching[kind][id] = true
  local args = { uri = view.uri, [kind] = id, start = #held.rows, limit = PAGE_ROWS,
    bookkeeping = config.options.tree.show_bookkeeping }
  -- Where the row was when asked: a page for a row that moved meanwhile is not reused.
  local node, draws = view.by_id[id] or {}, view.draws
  client.exec("pi.getTree", args, function(err, page)
    view.fetching[kind][id] = nil
    -- A folded row whose page failed or was dropped waits for the next draw or a fold key, not
    -- asked for at every scroll and cursor move; unless a draw came since it was asked for
    -- (that draw found it on its way and asked for nothing).
    local drawn_since = view.draws ~= draws
    if err then
      if row.under and not drawn_since then
        view.failed[id] = true
      end
      if view.reopen then -- held before: not asked for again at every draw
        view.reopen[kind][id] = nil
      end
      return util.error("pi.getTree: " .. (err.message or tostring(err)))
    end
    -- The tree may have been fetched again meanwhile: the page goes with the rows held now.
    local store = row.under and view.unfolded or view.branches
    -- Counted otherwise than the row drawn now: the tree changed, and its change redraws (so
    -- this draws nothing, and the row is not fetched again and again).
    local now = view.by_id[id] or {}
    if page.total ~= (row.under and now.hidden or now.moreBranches) or (row.after and page.rows ~= now.moreRows) then
      store[id] = nil
      if row.under and drawn_since then -- stale: asked for again now
        fetch_shown(buf, "view", vim.fn.win_findbuf(buf))
      elseif row.under then
        view.failed[id] = true
      else -- branches asked for: again at the tree's next draw, or now if it came
        view.reopen = view.reopen or { under = {}, after = {} }
        view.reopen.after[id] = view.reopen.after[id] or true
        if drawn_since then
          fetch_shown(buf, "draw", vim.fn.win_findbuf(buf))
        end
      end
      return
    end
    if #held.rows > 0 and (store[id] ~= held or page.total ~= held.total or page.rows ~= held.made) then
      store[id] = nil -- they changed while this page came: fetched again from the top
    else
      local rows = vim.list_extend(vim.list_slice(held.rows), page.nodes)
      store[id] = { total = page.total, made = page.rows, depth = node.depth, head = node.head, rows = rows }
    end
    view.redraw()
  end, view.root)
end

--- Fetch the rows of "more" rows in the windows `wins` (the current one by default) showing
--- the tree: with `how` "view" the first page of each folded row in view whose fold is open;
--- "cursor" those and the one on the cursor's line (a search or a click that opened a fold
--- moved the cursor); "draw" those, the ones held before the tree was fetched again (wherever
--- they are), and the cursor's "more" row (a draw that left it on one whose rows were dropped
--- as changed).
function fetch_shown(buf, how, wins)
  local view = views[buf]
  wins = wins or { vim.api.nvim_get_current_win() }
  if not view or not view.more then
    return
  end
  local reopen = how == "draw" and view.reopen or { under = {}, after = {} }
  if how == "draw" then
    -- Those still on their way are asked for at the next draw (a later page, when it comes,
    -- is dropped: its rows were fetched again), and those that held more pages than have come
    -- back, page after page.
    local waiting = { under = {}, after = {} }
    for kind, held in pairs(reopen) do
      local store = kind == "under" and view.unfolded or view.branches
      for id, was in pairs(held) do
        local short = type(was) == "table" and #was.rows > (store[id] and #store[id].rows or 0)
        waiting[kind][id] = (view.fetching[kind][id] or short) and was or nil
      end
    end
    view.reopen = (next(waiting.under) or next(waiting.after)) and waiting or nil
  end
  for _, win in ipairs(wins) do
    if shows(win, buf) then
      local cursor = vim.api.nvim_win_get_cursor(win)[1] - HEADER_LINES
      vim.api.nvim_win_call(win, function()
        -- Only the lines in view: folds opened by the hundred (zR, or fold_off_path off)
        -- would ask for every one at once. The rest come as they scroll in.
        local top, bottom = vim.fn.line("w0") - HEADER_LINES, vim.fn.line("w$") - HEADER_LINES
        for lnum, row in pairs(view.more) do
          local at_cursor = lnum == cursor
          local again = reopen[row.under and "under" or "after"][row.under or row.after or ""]
          -- Held before the tree was fetched again: every page they were, wherever they are.
          local first = row.start == 0
          local held = again and (first or type(again) == "table" and #again.rows > row.start)
          -- Branches left out come only when asked: drawn, they would be fetched at every draw.
          local shown = row.under and not view.failed[row.under]
            and (held or first and lnum >= top and lnum <= bottom) and vim.fn.foldclosed(lnum + HEADER_LINES) == -1
          local fetch = shown or (how == "cursor" and at_cursor)
            or (how == "draw" and (row.after and held or first and at_cursor and (row.under or row.after)))
          if fetch then
            fetch_more(buf, row)
          end
        end
      end)
    end
  end
end

--- Fetch the tree and redraw (coalesced per buffer).
function M.refresh(buf)
  local view = views[buf]
  if view then
    view.refresh()
  end
end

-- -- actions -----------------------------------------------------------------------------------

local function entry_under_cursor(buf)
  local view = views[buf]
  local lnum = vim.api.nvim_win_get_cursor(0)[1]
  local id = view and view.line_ids and view.line_ids[lnum - HEADER_LINES]
  local more = view and view.more and view.more[lnum - HEADER_LINES]
  if more then
    -- Said as such: "no entry on this line" read as a fault on a line that lists entries.
    util.warn(('"%s" is a fold, not an entry: with the cursor on it its rows are fetched; act on one of them')
      :format(vim.trim(node_line(more))))
    return nil
  elseif not id then
    util.warn("no entry on this line")
    return nil
  end
  return view.by_id[id], view
end

--- Put text in the session's chat input (opening the chat).
local function to_chat_input(view, text)
  require("pi_lsp.chat").open(view.uri, { input = text })
end

M.actions = {}

-- After a branch (plain or summarized), offer to restore the files when they differ, counting
-- the paths a restore would leave alone (the diff lists them). Those alone ask nothing: an
-- unchanged file over the snapshot cap or a nested clone would make every branch ask.
local function offer_restore(view, result)
  local changes, alone = result.fileChanges or 0, result.leftAlone or 0
  if changes > 0 and result.leafId then
    local also = alone > 0 and (", and a restore leaves %d alone (listed in the diff)"):format(alone) or ""
    local question = ("%d file(s) differ from this entry%s. "):format(changes, also)
    require("pi_lsp.rewind").offer(view.uri, result.leafId, view.root, question)
  end
end

function M.actions.branch(buf)
  local node, view = entry_under_cursor(buf)
  if not node then
    return
  end
  if node.id == view.leaf then
    return util.notify("already at this point") -- pi's /tree on the leaf: nothing moves
  end
  client.run("pi.branch", { uri = view.uri, targetId = node.id }, function(result)
    if result.editorText then
      -- Moving to a user message lands on its parent and hands back its text.
      util.notify("moved to the parent of " .. node.id .. "; its prompt is in the chat input")
      require("pi_lsp.chat").set_input(view.uri, result.editorText)
    else
      util.notify("leaf is now " .. (result.leafId or "(root)"))
    end
    M.refresh(buf)
    offer_restore(view, result)
  end, view.root)
end

function M.actions.branch_summary(buf)
  local node, view = entry_under_cursor(buf)
  if not node then
    return
  end
  vim.ui.input({ prompt = "Summary instructions (optional): " }, function(instructions)
    if instructions == nil then
      return
    end
    local args = { uri = view.uri, targetId = node.id }
    if vim.trim(instructions) ~= "" then
      args.instructions = instructions
    end
    client.run("pi.branchWithSummary", args, function(result)
      util.notify("summarizing the branch you leave…")
      session.on_job(result.jobId, function(done)
        if not done.ok then
          return util.error("branch summary failed: " .. tostring(done.error))
        end
        util.notify("branched to " .. node.id .. " with a summary")
        if done.result and done.result.editorText then
          require("pi_lsp.chat").set_input(view.uri, done.result.editorText)
        end
        M.refresh(buf)
        offer_restore(view, done.result or {})
      end)
    end, view.root)
  end)
end

function M.actions.label(buf)
  local node, view = entry_under_cursor(buf)
  if not node then
    return
  end
  -- vim.ui.input hands both to vim.fn.input: one line, no NUL
  local prompt = "Label for " .. util.one_line(node.id) .. " (empty clears): "
  vim.ui.input({ prompt = prompt, default = util.one_line(node.label or "") }, function(label)
    if label == nil then
      return
    end
    label = vim.trim(label)
    client.run("pi.label", { uri = view.uri, targetId = node.id, label = label ~= "" and label or vim.NIL }, function()
      M.refresh(buf)
    end, view.root)
  end)
end

function M.actions.fork(buf)
  local node, view = entry_under_cursor(buf)
  if not node then
    return
  end
  client.run("pi.fork", { uri = view.uri, leafId = node.id }, function(result)
    util.notify("forked at " .. node.id .. " into " .. vim.fn.fnamemodify(util.key(result.uri), ":t"))
    session.use(result.uri, view.root)
    M.open(result.uri)
  end, view.root)
end

function M.actions.preview(buf)
  local node, view = entry_under_cursor(buf)
  if node then
    require("pi_lsp.context").preview(view.uri, node.id)
  end
end

function M.actions.diff(buf)
  local node, view = entry_under_cursor(buf)
  if node then
    require("pi_lsp.context").diff(view.uri, node.id, view.leaf, view.by_id)
  end
end

function M.actions.edit(buf)
  local node, view = entry_under_cursor(buf)
  if not node then
    return
  end
  if node.role ~= "user" then
    return util.warn(node.id .. " is not a prompt of yours (only user messages can be edited)")
  end
  local function edited(result)
    M.refresh(buf)
    to_chat_input(view, result.editorText or "")
  end
  client.run("pi.branch", { uri = view.uri, targetId = node.id }, function(result)
    -- The leaf's own prompt, which a plain move leaves where it is (as pi does): asked again
    -- with `edit`, sent only then, as a server before it refuses it (an older one moves off).
    if (result.editorText == nil or result.editorText == vim.NIL) and result.leafId == node.id then
      return client.run("pi.branch", { uri = view.uri, targetId = node.id, edit = true }, edited,
        view.root)
    end
    edited(result)
  end, view.root)
end

function M.actions.restore_files(buf)
  local node, view = entry_under_cursor(buf)
  if node then
    require("pi_lsp.rewind").offer(view.uri, node.id, view.root)
  end
end

function M.actions.undo_restore(buf)
  require("pi_lsp.rewind").undo(views[buf].uri, views[buf].root)
end

function M.actions.chat(buf)
  require("pi_lsp.chat").open(views[buf].uri)
end

function M.actions.refresh(buf)
  M.refresh(buf)
end

function M.actions.close()
  util.close_window()
end

function M.actions.help()
  local keys = config.options.tree.keys
  local lines = {}
  for _, item in ipairs(HELP) do
    local key = keys[item[1]]
    if key then
      lines[#lines + 1] = ("%-9s %s"):format(type(key) == "table" and table.concat(key, ", ") or key, item[3])
    end
  end
  util.notify("tree keys:\n" .. table.concat(lines, "\n"))
end

local function map_keys(buf)
  -- Opening a fold fetches the rows folded into it.
  for _, key in ipairs({ "zo", "zO", "za", "zA", "zv", "zr", "zR", "zn", "zi", "zx", "zX" }) do
    util.map(buf, "n", key, function()
      pcall(vim.cmd, "normal! " .. vim.v.count1 .. key) -- E490 on a line with no fold
      if views[buf] then
        views[buf].failed = {} -- asked for again
      end
      fetch_shown(buf, "view")
    end, ("pi: %s, then fetch the rows of the folds it opens"):format(key))
  end
  for action, keys in pairs(config.options.tree.keys) do
    for _, key in ipairs(type(keys) == "table" and keys or { keys }) do
      util.map(buf, "n", key, function()
        M.actions[action](buf)
      end, "pi: " .. action)
    end
  end
end

-- -- opening -----------------------------------------------------------------------------------

--- Whether a change adds a label entry: the label can be on a row folded under another, which
--- the change does not carry (the folded row's count stays). Entries a turn streams are not.
local function relabels(delta)
  for _, row in ipairs(delta.rows) do
    if row.type == "label" then
      return true
    end
  end
  return false
end

--- Drop the rows and branches fetched, to be fetched anew; those held come back at the next
--- draw in a window (`reopen`), in view or not: they were open, or asked for.
local function reopen_held(view)
  view.reopen = view.reopen or { under = {}, after = {} }
  for kind, store in pairs({ under = view.unfolded, after = view.branches }) do
    for id, held in pairs(store) do
      local was = view.reopen[kind][id]
      if not (type(was) == "table" and #was.rows > #held.rows) then -- (fetched again only in part)
        view.reopen[kind][id] = held
      end
    end
  end
  view.unfolded, view.branches = {}, {}
end

local function buffer_for(uri, root)
  for buf, view in pairs(views) do
    if vim.api.nvim_buf_is_valid(buf) and util.same(view.uri, uri) then
      if vim.api.nvim_buf_is_loaded(buf) then
        return buf
      end
      vim.api.nvim_buf_delete(buf, { force = true }) -- unloaded (:bdelete), keys gone: made anew
    end
  end
  -- The buffer's options, variables and keys (:bdelete clears them: set again when it is read).
  local function set_up(shown)
    local made = util.scratch("pi://tree/" .. vim.fn.fnamemodify(util.key(shown), ":t:r"), "pitree", shown)
    vim.b[made].pi_lsp_uri, vim.b[made].pi_lsp_root = shown, root
    map_keys(made)
    return made
  end
  local buf = set_up(uri)
  local view = { uri = uri, root = root, limit = PATH_ROWS, unfolded = {}, branches = {}, closed_in = {},
    pending_cursor = {} }
  view.fetching, view.failed = { under = {}, after = {} }, {}
  views[buf] = view
  -- Pages come in bursts (the rows held, after a refetch): one draw for those come meanwhile.
  view.redraw = function()
    if view.redrawing then
      return
    end
    view.redrawing = true
    vim.schedule(function()
      view.redrawing = false
      if views[buf] == view and vim.api.nvim_buf_is_valid(buf) then
        draw(buf, view, view.tree)
      end
    end)
  end
  view.refresh = util.coalesce(function(done)
    local args = { uri = view.uri, bookkeeping = config.options.tree.show_bookkeeping, limit = view.limit }
    view.bookkeeping = args.bookkeeping -- the kind of tree the changes patch
    client.exec("pi.getTree", args, function(err, tree)
      if err then
        util.error("pi.getTree: " .. (err.message or tostring(err)))
      elseif vim.api.nvim_buf_is_valid(buf) then
        reopen_held(view)
        draw(buf, view, tree)
      end
      done()
    end, root)
  end)
  -- The folds as they were left are what the next window showing the tree starts with; of
  -- several windows on the tree, the one last in has the folds the draws read and set.
  local function keep_folds()
    local closed = closed_folds(buf, view, view.win)
    if closed then
      view.closed, view.closed_in[view.win] = closed, closed
    end
  end
  local left -- the cursor in the window the tree last left (:bdelete hides it first)
  vim.api.nvim_create_autocmd({ "BufWinLeave", "WinLeave" }, {
    buffer = buf,
    callback = function()
      keep_folds()
      left = cursor_at(buf, view, tree_win(buf)) or cursor_at(buf, view, vim.api.nvim_get_current_win()) or left
    end,
  })
  -- :edit, or :buffer after :bdelete, loads the tree's buffer anew, empty: it is drawn again,
  -- its folds and the cursor's entry as read when it was emptied.
  local emptied
  vim.api.nvim_create_autocmd("BufUnload", {
    buffer = buf,
    callback = function()
      keep_folds()
      emptied = cursor_at(buf, view, tree_win(buf)) or left
    end,
  })
  vim.api.nvim_create_autocmd("BufReadCmd", {
    buffer = buf,
    callback = function()
      set_up(view.uri) -- (the session may have moved to a new file since)
      if view.tree then
        view.rendered = false
        draw(buf, view, view.tree, emptied)
        emptied = tree_win(buf) == -1 and emptied or nil -- (loaded in no window: for the first)
      end
    end,
  })
  vim.api.nvim_create_autocmd("WinEnter", {
    buffer = buf,
    callback = function()
      -- Once the command is done: :split enters a window on the tree that may show another
      -- buffer a moment later (:split | enew, the preview's split).
      local win = vim.api.nvim_get_current_win()
      vim.schedule(function()
        if shows(win, buf) then
          view.win = win
        end
      end)
    end,
  })
  vim.api.nvim_create_autocmd("BufWinEnter", {
    buffer = buf,
    callback = function()
      local win = vim.api.nvim_get_current_win()
      if not shows(win, buf) then
        return -- the hidden window of bufload()
      end
      util.use_folds(win, 99) -- a window new to the tree: its options came from another
      view.closed_in[win] = nil
      if view.folds then
        restore_folds(win, view, view.folds, view.closed)
      end
      view.win = win -- its folds are now the ones to read
      if view.tree and (emptied or text_width(buf) ~= view.width) then -- drawn in no window
        draw(buf, view, view.tree, emptied)
        emptied = nil
      end
    end,
  })
  vim.api.nvim_create_autocmd("CursorMoved", {
    buffer = buf,
    callback = function()
      local win = vim.api.nvim_get_current_win()
      local pending = view.pending_cursor[win]
      if pending and vim.api.nvim_win_get_cursor(win)[1] ~= view.ids_line[pending.at] then
        view.pending_cursor[win] = nil -- moved off the row it waits on
      end
      fetch_shown(buf, "cursor")
    end,
  })
  util.tie(buf, {
    util.on("sessionChanged", function(change)
      if not util.same(change.uri, view.uri) then
        return
      end
      local same_kind = view.bookkeeping == config.options.tree.show_bookkeeping
      local patched = same_kind and M.patch(view.tree, change.tree)
      if patched then
        if relabels(change.tree) then
          -- A label may sit on a row not in the tree: fetched again.
          reopen_held(view)
        end
        draw(buf, view, patched)
      else
        view.refresh() -- a version missed, or no change to patch with: fetch the tree
      end
    end),
    util.on("sessionMoved", function(old, new)
      -- Another program cut the file short: the session, and so the tree, goes on in a new file.
      if util.same(old, view.uri) then
        view.uri = new
        view.refresh()
      end
    end),
    util.on("initialized", function(started)
      -- A server started again (after a crash) follows only the sessions asked of it. (A
      -- view not drawn yet has its first fetch waiting for this server already.)
      if started == root and view.tree then
        view.refresh()
      end
    end),
    function()
      views[buf] = nil
      util.forget_folds(buf)
    end,
  })
  return buf
end

-- A tree window that changes width lays its lines out again (no server call).
vim.api.nvim_create_autocmd({ "WinResized", "VimResized" }, {
  group = vim.api.nvim_create_augroup("pi_lsp_tree_width", { clear = true }),
  callback = function()
    for buf, view in pairs(views) do
      if view.tree and vim.api.nvim_buf_is_valid(buf) and text_width(buf) and text_width(buf) ~= view.width then
        draw(buf, view, view.tree)
      end
    end
  end,
})

-- Lines scrolled into view in a tree's window fetch the rows of their open folds.
vim.api.nvim_create_autocmd("WinScrolled", {
  group = vim.api.nvim_create_augroup("pi_lsp_tree_scroll", { clear = true }),
  callback = function(args)
    local scrolled = { [tonumber(args.match) or -1] = true } -- the first; v:event has all
    for key in pairs(vim.v.event) do
      scrolled[tonumber(key) or -1] = true
    end
    for win in pairs(scrolled) do
      local buf = vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win)
      if buf and views[buf] then
        fetch_shown(buf, "view", { win })
      end
    end
  end,
})

--- Open the tree of `uri` in a split (or its window, if shown).
function M.open(uri)
  local root = session.root_of(uri)
  local buf = buffer_for(uri, root)
  local win = util.show(buf, "topleft vsplit")
  util.set_local(win, { wrap = false, cursorline = true, number = false, relativenumber = false })
  M.refresh(buf)
  return buf
end

function M.command(arg)
  session.resolve(arg, M.open)
end

--- The view behind a tree buffer (tests and statuslines read it).
function M.view(buf)
  return views[buf or vim.api.nvim_get_current_buf()]
end

return M
