-- Small helpers shared by the pi-lsp modules: version shims, an event bus,
-- scratch buffers and expression folds. Nothing here knows about sessions.
local M = {}

M.has_011 = vim.fn.has("nvim-0.11") == 1

--- Report to the user with one prefix, so messages are easy to attribute.
function M.notify(message, level)
  vim.notify("pi-lsp: " .. message, level or vim.log.levels.INFO)
end

function M.warn(message)
  M.notify(message, vim.log.levels.WARN)
end

function M.error(message)
  M.notify(message, vim.log.levels.ERROR)
end

--- A stable key for a session URI: the server may spell one file's URI in
--- more than one way (percent-encoding, resolved paths), the key may not.
function M.key(uri)
  if type(uri) ~= "string" or uri == "" then
    return nil
  end
  local path = uri:match("^file:") and vim.uri_to_fname(uri) or uri
  -- A repository names its sessions: `$HOME.jsonl` is a name, not another file's path.
  return vim.fs.normalize(path, { expand_env = false })
end

function M.same(a, b)
  return a ~= nil and b ~= nil and M.key(a) == M.key(b)
end

function M.split_lines(text)
  return vim.split(text or "", "\n", { plain = true })
end

--- Whether JavaScript (so pi) takes a session value for true: Lua takes 0 and "" for true, a
--- JSON null (vim.NIL) too; JavaScript does not, and takes {} and [] for true as Lua does.
function M.truthy(value)
  return value ~= nil and value ~= false and value ~= vim.NIL and value ~= 0 and value ~= ""
    and value == value -- NaN
end

-- What else one_line makes a space, in UTF-8, as pi_lsp/visible.py's UNSAFE and VS Code's
-- oneLine do: C1 controls (U+0080-009F), the line and paragraph separators and the bidi
-- embeddings and overrides (U+2028-202E), the bidi isolates (U+2066-2069).
local NOT_ONE_LINE = { "\194[\128-\159]", "\226\128[\168-\174]", "\226\129[\166-\169]" }

--- `text` as one buffer line: control characters (line breaks too), line separators and bidi
--- controls as spaces. Ids, names and paths are a session file's text: a line holding a newline
--- fails the whole draw, and a U+202E would show the rest of its line reversed.
function M.one_line(text)
  local flat = tostring(text):gsub("%c", " ")
  for _, pattern in ipairs(NOT_ONE_LINE) do
    flat = flat:gsub(pattern, " ")
  end
  return flat
end

--- The fewest significant digits that read back as `x` (> 0), and where the point goes after
--- the first of them; of two as near, the even one, as JavaScript picks (LuaJIT's %e rounds a
--- tie up).
local function shortest_digits(x)
  for precision = 0, 16 do
    local text = ("%." .. precision .. "e"):format(x)
    if tonumber(text) == x then
      local mantissa, power = text:match("^(.-)e(.*)$")
      local digits = mantissa:gsub("%.", "")
      local exact = ("%.40e"):format(x):gsub("%.", "")
      if digits:match("[13579]$") and exact:sub(precision + 2):match("^50*e") then
        local lower = digits:sub(1, -2) .. (tonumber(digits:sub(-1)) - 1)
        if tonumber(("%s.%se%s"):format(lower:sub(1, 1), lower:sub(2), power)) == x then
          digits = lower
        end
      end
      return (digits:gsub("(.)0+$", "%1")), tonumber(power) + 1
    end
  end
end

--- A number as JavaScript writes it (Number.prototype.toString): the fewest digits that read
--- back as it, in fixed notation from 1e-6 to below 1e21. Lua's %.14g loses digits.
function M.js_number(n)
  if n ~= n then
    return "NaN"
  elseif n == math.huge or n == -math.huge then
    return n > 0 and "Infinity" or "-Infinity"
  elseif n == 0 then
    return "0" -- -0 too
  end
  local digits, point = shortest_digits(math.abs(n))
  local sign, count = n < 0 and "-" or "", #digits
  if count <= point and point <= 21 then
    return sign .. digits .. ("0"):rep(point - count)
  elseif 0 < point and point <= 21 then
    return sign .. digits:sub(1, point) .. "." .. digits:sub(point + 1)
  elseif -6 < point and point <= 0 then
    return sign .. "0." .. ("0"):rep(-point) .. digits
  end
  local shown = count == 1 and digits or (digits:sub(1, 1) .. "." .. digits:sub(2))
  return ("%s%se%s%d"):format(sign, shown, point > 0 and "+" or "-", math.abs(point - 1))
end

--- A session value as JavaScript's String() writes it, as pi and the server's views show a
--- field of another type: an object as "[object Object]", a list's items joined with commas
--- (a null as nothing), numbers as JavaScript writes them.
function M.js_string(value)
  local kind = type(value)
  if kind == "string" then
    return value
  elseif value == nil or value == vim.NIL then
    return value == nil and "undefined" or "null"
  elseif kind == "number" then
    return M.js_number(value)
  elseif kind == "table" and getmetatable(value) == nil and vim.islist(value) then
    return table.concat(vim.tbl_map(function(item)
      return item == vim.NIL and "" or M.js_string(item)
    end, value), ",")
  elseif kind == "table" then
    return "[object Object]"
  end
  return tostring(value)
end

--- "1234" -> "1.2k": statuslines and headers have little room.
function M.short_count(n)
  n = tonumber(n) or 0
  if n >= 1000000 then
    return (string.format("%.1fM", n / 1000000):gsub("%.0M$", "M"))
  elseif n >= 1000 then
    return (string.format("%.1fk", n / 1000):gsub("%.0k$", "k"))
  end
  return tostring(n)
end

--- "12345" -> "12,345", as the server's own Markdown writes numbers.
function M.thousands(n)
  local s = tostring(math.floor(tonumber(n) or 0))
  local formatted = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (formatted:gsub("^,", ""))
end

--- The blocking pickers open, innermost last: each runs inside the one under it, and only the
--- innermost reads the keys typed. `esc` is "due" for one closed that waits for its <Esc>.
local blocking = {}

--- Send <Esc> to the innermost blocking picker if it was closed: one under another is closed
--- only once those over it return, else the <Esc> would answer theirs.
local function esc_innermost()
  local innermost = blocking[#blocking]
  if innermost and innermost.esc == "due" then
    innermost.esc = "sent"
    vim.api.nvim_input("<Esc>")
  end
end

--- A question the server may take back (its turn was aborted): `ask(fn)` runs `fn`, which opens
--- the picker; `close()` takes the question back. A picker that blocks until answered
--- (vim.ui.select's default, vim.fn.inputlist) is still running when that comes, as the
--- events go on meanwhile, and gets the <Esc> a person would press, once no blocking picker
--- opened over it meanwhile (another session's question) is left. One that returned at once
--- (a plugin's floating picker) cannot be closed from here: its late answer is for the caller
--- to ignore.
function M.picker()
  local mine = nil -- this picker's entry in `blocking` while `fn` runs
  local self = {}
  function self.ask(fn)
    mine = {}
    blocking[#blocking + 1] = mine
    local ok, err = pcall(fn)
    for i = #blocking, 1, -1 do
      if blocking[i] == mine then
        table.remove(blocking, i)
        break
      end
    end
    mine = nil
    esc_innermost()
    if not ok then
      error(err, 0)
    end
  end
  function self.close()
    if mine and not mine.esc then
      mine.esc = "due"
      esc_innermost()
    end
  end
  return self
end

-- -- event bus ----------------------------------------------------------------------------
-- Notifications from the server are fanned out to whichever views are open;
-- views subscribe when created and unsubscribe when their buffer goes away.
-- It also carries what a lower module must not call upward for (init.lua
-- wires the listeners): the events are the server's sessionsChanged,
-- sessionChanged, turn and jobDone; initialized (root, client: a server is
-- ready); stopped (root: its server exited); listed (root: session.list);
-- openTree (uri: the chat asks for it).

local listeners = {}

function M.on(event, fn)
  listeners[event] = listeners[event] or {}
  listeners[event][fn] = true
  return function()
    listeners[event][fn] = nil
  end
end

--- Call `on_end(why)` once `ended(note)` gives a reason for a "turn" notification, or the
--- server of `root` stops; returns the function that stops listening.
function M.on_turn_end(root, ended, on_end)
  local stops = {
    M.on("stopped", function(stopped)
      if stopped == root then
        on_end("the server stopped")
      end
    end),
    M.on("turn", function(note)
      local why = ended(note)
      if why then
        on_end(why)
      end
    end),
  }
  return function()
    for _, stop in ipairs(stops) do
      stop()
    end
  end
end

function M.emit(event, ...)
  -- Copy first: a listener may unsubscribe (or subscribe) while we iterate.
  local current = {}
  for fn in pairs(listeners[event] or {}) do
    current[#current + 1] = fn
  end
  for _, fn in ipairs(current) do
    local ok, err = pcall(fn, ...)
    if not ok then
      M.error(("%s listener failed: %s"):format(event, err))
    end
  end
end

--- Unsubscribe `unsubscribe` functions when `buf` is wiped out.
function M.tie(buf, unsubscribers)
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    callback = function()
      for _, off in ipairs(unsubscribers) do
        off()
      end
    end,
  })
end

--- Run async `work(done)` at most once at a time; triggers that arrive while it
--- runs collapse into one more run. Keeps re-renders from piling up when the
--- server sends a burst of notifications.
function M.coalesce(work)
  local running, again = false, false
  local trigger
  trigger = function()
    if running then
      again = true
      return
    end
    running = true
    work(function()
      running = false
      if again then
        again = false
        vim.schedule(trigger)
      end
    end)
  end
  return trigger
end

-- -- buffers ------------------------------------------------------------------------------

--- The buffer named exactly `name`; -1 for none.
local function named(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b -- compared exactly: bufnr() would read the name as a pattern
    end
  end
  return -1
end

--- A scratch buffer with a fixed name; the same name reuses the same buffer so
--- repeated commands do not pile up buffers. With `uri`, a buffer showing another session is
--- not reused: two session folders may hold files of one name, and the second session's view
--- is named "NAME (2)" (then 3 …).
function M.scratch(name, filetype, uri)
  local wanted, n = name, 1
  local buf = named(wanted)
  while uri and buf ~= -1 and vim.b[buf].pi_lsp_uri and not M.same(vim.b[buf].pi_lsp_uri, uri) do
    n = n + 1
    wanted = ("%s (%d)"):format(name, n)
    buf = named(wanted)
  end
  if buf == -1 then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, wanted)
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  if filetype == "markdown" then
    -- Headings, emphasis and code blocks (with their languages) rendered by
    -- the treesitter parsers nvim ships; the regex syntax is the fallback.
    pcall(vim.treesitter.start, buf, "markdown")
  end
  return buf
end

--- Set window options of `win` for the buffer it shows only: vim.wo would set the window's
--- global values too, and every buffer shown there later would inherit them.
function M.set_local(win, options)
  for name, value in pairs(options) do
    vim.api.nvim_set_option_value(name, value, { scope = "local", win = win })
  end
end

--- A window showing Markdown: markup hidden, except on the cursor line.
function M.markdown_window(win)
  M.set_local(win, { conceallevel = 2, concealcursor = "" })
end

--- Replace lines of a read-only buffer (it stays read-only for the user).
function M.set_lines(buf, first, last, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, first, last, false, lines)
  vim.bo[buf].modifiable = false
end

--- Show `buf` in a window: its own window if it has one, else a split.
function M.show(buf, split)
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 then
    vim.api.nvim_set_current_win(win)
    return win
  end
  vim.cmd(split or "split")
  vim.api.nvim_win_set_buf(0, buf)
  return vim.api.nvim_get_current_win()
end

--- Close `win` (the current window when nil); the last window, which :close refuses (E444),
--- shows an empty buffer instead.
function M.close_window(win)
  win = win or vim.api.nvim_get_current_win()
  if not pcall(vim.api.nvim_win_close, win, false) then
    vim.api.nvim_win_call(win, function()
      vim.cmd("enew")
    end)
  end
end

function M.map(buf, modes, lhs, fn, desc)
  if lhs and lhs ~= "" then
    vim.keymap.set(modes, lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
end

-- -- folds --------------------------------------------------------------------------------
-- Views compute their folds while rendering; the fold expression only looks
-- the level up, so folding costs nothing per keystroke.

local fold_levels = {}

--- `ranges`: list of {first, last, level?} (1-based lines). Nested ranges
--- need increasing levels; ranges of one level must not overlap.
function M.set_folds(buf, ranges)
  local levels = {}
  for _, range in ipairs(ranges) do
    local level = range[3] or 1
    levels[range[1]] = ">" .. level
    for lnum = range[1] + 1, range[2] do
      if levels[lnum] == nil or tonumber(levels[lnum]) then
        levels[lnum] = math.max(level, tonumber(levels[lnum]) or 0)
      end
    end
  end
  fold_levels[buf] = levels
end

function M.foldexpr(lnum)
  local levels = fold_levels[vim.api.nvim_get_current_buf()]
  local level = levels and levels[lnum]
  return level and tostring(level) or "0"
end

--- What a closed fold of `count` more lines adds to its first line.
function M.fold_marker(count)
  return ("  … %d more line%s"):format(count, count == 1 and "" or "s")
end

function M.foldtext()
  return vim.fn.getline(vim.v.foldstart) .. M.fold_marker(vim.v.foldend - vim.v.foldstart)
end

--- The code spans of a line of Markdown, each { text, first, last } (its bytes, backticks
--- included): a run of backticks opens one, the next run as long closes it.
local function code_spans(line)
  local spans, at = {}, 1
  while true do
    local from, to = line:find("`+", at)
    if not from then
      return spans
    end
    local close, close_end = line:find("`+", to + 1)
    while close and close_end - close ~= to - from do
      close, close_end = line:find("`+", close_end + 1)
    end
    if close then
      spans[#spans + 1] = { text = line:sub(to + 1, close - 1), first = from, last = close_end }
    end
    at = (close_end or to) + 1
  end
end

--- A line of Markdown without its markup, as a window that conceals it shows it: a code span's
--- text as written (a tool's error).
function M.plain_markdown(line)
  -- Each code span stands aside as \1<n>\2 while the markup goes: fold lines hold no control
  -- characters (one_line).
  local spans, at, marked = code_spans(line), 1, {}
  for i, span in ipairs(spans) do
    marked[#marked + 1] = line:sub(at, span.first - 1) .. "\1" .. i .. "\2"
    at = span.last + 1
  end
  line = table.concat(marked) .. line:sub(at)
  line = line:gsub("^#+%s+", ""):gsub("^>%s?", ""):gsub("%*%*(.-)%*%*", "%1")
  -- _emphasis_, not the underscores inside a word (read_file)
  line = (" " .. line .. " "):gsub("([%s%(])_([^_]+)_([%s%).,:;])", "%1%2%3"):sub(2, -2)
  return (line:gsub("\1(%d+)\2", function(i)
    return spans[tonumber(i)].text
  end))
end

--- The fold text of a Markdown window: a fold's line shows no markup either.
function M.markdown_foldtext()
  return M.plain_markdown(vim.fn.getline(vim.v.foldstart)) .. M.fold_marker(vim.v.foldend - vim.v.foldstart)
end

local FOLDEXPR = "v:lua.require'pi_lsp.util'.foldexpr(v:lnum)"

--- Give a window expression folds read from `set_folds`; `markdown`: its
--- lines are Markdown (see markdown_foldtext).
function M.use_folds(win, level, markdown)
  M.set_local(win, {
    foldmethod = "expr",
    foldexpr = FOLDEXPR,
    foldtext = ("v:lua.require'pi_lsp.util'.%s()"):format(markdown and "markdown_foldtext" or "foldtext"),
    foldlevel = level or 0,
    foldenable = true,
  })
end

--- Whether `win` folds by the levels set here (a buffer shown without BufWinEnter, as by
--- :noautocmd, has the window's own folding).
function M.has_folds(win)
  return vim.wo[win].foldmethod == "expr" and vim.wo[win].foldexpr == FOLDEXPR
end

function M.forget_folds(buf)
  fold_levels[buf] = nil
end

return M
