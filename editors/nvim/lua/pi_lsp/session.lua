-- Which session a command acts on, the session list, the per-session status
-- the statusline shows, and waiting for background jobs.
local client = require("pi_lsp.client")
local util = require("pi_lsp.util")

local M = {}

M.last_uri = nil -- the session last used (any command)
M.listed = {} -- root -> sessions from the last pi.listSessions
local roots = {} -- session key -> workspace root it was found under
local status = {} -- session key -> {model, thinkingLevel, totalTokens, contextWindow, busy}
local running = {} -- session key -> turnId of the turn running on it
local moved = {} -- key of a file another program cut short -> key of the file its session moved to
local moved_turns = {} -- turnId -> uri: a turn whose session moved goes on naming the old file
local jobs = {} -- jobId -> callback(done)
local finished = {} -- jobId -> done that arrived before its callback was registered

function M.root_of(uri)
  return roots[util.key(uri)] or client.root(0)
end

--- Remember `uri` as the session last used (and the root it lives under).
function M.use(uri, root)
  if not uri then
    return
  end
  M.last_uri = uri
  local key = util.key(uri)
  roots[key] = roots[key] or root or client.root(0)
  if not (status[key] and status[key].model) then
    M.refresh_status(uri)
  end
end

local HEADER_SCAN_LINES = 20

--- Why the file at `path` is not a pi session file, or nil if it may be one:
--- its first JSON object line must be a session header (blank and damaged
--- lines before it are skipped, as the server skips them).
function M.not_a_session(path)
  local file = io.open(path, "rb")
  if not file then
    return "it cannot be read"
  end
  local found
  for _ = 1, HEADER_SCAN_LINES do
    local line = file:read("*l")
    if not line then
      break
    end
    local ok, value = pcall(vim.json.decode, (line:gsub("^\239\187\191", "")))
    if ok and type(value) == "table" and not vim.islist(value) then
      found = value
      break
    end
  end
  file:close()
  if not found then
    return "it has no session header"
  end
  if found.type ~= "session" then
    return "its first entry is not a session header"
  end
  return nil
end

--- Report a file that is not a session; true if it was one to report.
local function refuse_file(path)
  local why = M.not_a_session(path)
  if why then
    util.error(("%s is not a pi session file (%s)"):format(vim.fn.fnamemodify(path, ":~:."), why))
  end
  return why ~= nil
end

--- The session a buffer shows: a pi view knows its session; a `.jsonl` file
--- is taken for a session file (checked by M.resolve, and by the server).
function M.of_buffer(buf)
  buf = buf or 0
  if vim.b[buf].pi_lsp_uri then
    return vim.b[buf].pi_lsp_uri
  end
  local name = vim.api.nvim_buf_get_name(buf)
  if name:match("%.jsonl$") and vim.fn.filereadable(name) == 1 then
    return vim.uri_from_fname(vim.fn.fnamemodify(name, ":p"))
  end
  return nil
end

function M.list(callback, root)
  root = root or client.root(0)
  client.run("pi.listSessions", {}, function(result)
    M.listed[root] = result.sessions or {}
    for _, s in ipairs(M.listed[root]) do
      roots[util.key(s.uri)] = roots[util.key(s.uri)] or root
    end
    util.emit("listed", root) -- views take their titles from the list
    callback(M.listed[root])
  end, root)
end

--- `arg` as a path: `%`, `~` and `$NAME` expanded as on the command line, but no backtick:
--- vim.fn.expand runs "`cmd`" in a shell, and names a repository chose are completed.
local function as_path(arg)
  return vim.fn.fnamemodify(arg:find("`", 1, true) and arg or vim.fn.expand(arg), ":p")
end

--- The sessions a user named: by URI or path (one), else by id or name, else by a prefix of
--- the id. Several may share a name or id, as sessions whose long names the server sent cut do.
local function matches(sessions, wanted)
  local path = as_path(wanted)
  local exact, prefixed = {}, {}
  for _, s in ipairs(sessions) do
    if s.uri == wanted or util.key(s.uri) == util.key(path) then
      return { s }
    end
    if s.id == wanted or s.name == wanted then
      exact[#exact + 1] = s
    elseif vim.startswith(s.id or "", wanted) then
      prefixed[#prefixed + 1] = s
    end
  end
  return #exact > 0 and exact or prefixed
end

--- Ask which of the sessions `wanted` names is meant; their file names tell them apart.
local function choose(found, wanted, callback)
  vim.ui.select(found, {
    prompt = ("%d sessions match %q"):format(#found, wanted),
    format_item = function(s)
      return ("%s  · %s"):format(M.describe(s), vim.fn.fnamemodify(util.key(s.uri), ":t"))
    end,
  }, function(s)
    if s then
      callback(s.uri)
    end
  end)
end

function M.describe(s)
  local when = (s.modified or ""):gsub("T", " "):gsub("%..*$", "")
  return ("%s  · %s · %d entries"):format(s.title, when, s.entryCount or 0)
end

--- Resolve the session for a command, in the documented order: the argument,
--- the current buffer's session, the session last used, the newest session of
--- the workspace, and only then ask. `callback(uri)` is not called if none.
function M.resolve(arg, callback)
  local root = client.root(0)
  local done = function(uri)
    M.use(uri, root)
    callback(uri)
  end
  if arg and arg ~= "" then
    if arg:match("^file:") then
      return done(arg)
    end
    return M.list(function(sessions)
      local found = matches(sessions, arg)
      if #found > 1 then
        return choose(found, arg, done)
      elseif found[1] then
        return done(found[1].uri)
      end
      local path = as_path(arg)
      if vim.fn.filereadable(path) == 1 then
        if refuse_file(path) then
          return
        end
        return done(vim.uri_from_fname(path))
      end
      util.error(("no session matches %q"):format(arg))
    end, root)
  end
  local buffer_uri = M.of_buffer(0)
  if buffer_uri then
    if not vim.b.pi_lsp_uri and refuse_file(vim.uri_to_fname(buffer_uri)) then
      return
    end
    return done(buffer_uri)
  end
  -- The last used unless it was deleted: a file on disk may be a session outside the list
  -- (opened by its path), and a new session has no file until its first prompt but is listed.
  local last = M.last_uri
  if last and vim.uv.fs_stat(vim.uri_to_fname(last)) then
    return done(last)
  end
  M.list(function(sessions)
    if vim.iter(sessions):any(function(s)
      return util.same(s.uri, last)
    end) then
      return done(last)
    end
    if sessions[1] then
      return done(sessions[1].uri) -- the server lists newest first
    end
    M.pick(done, { prompt = "No pi session in this workspace yet" })
  end, root)
end

--- Create a session, asking for an optional name. `callback(uri, true)`.
function M.create(callback)
  vim.ui.input({ prompt = "Name of the new session (optional): " }, function(name)
    if name == nil then
      return -- cancelled
    end
    local args = {}
    if vim.trim(name) ~= "" then
      args.name = vim.trim(name)
    end
    client.run("pi.newSession", args, function(result)
      M.use(result.uri)
      callback(result.uri, true)
    end)
  end)
end

--- Let the user pick a session, or start a new one. `callback(uri, created)`.
function M.pick(callback, opts)
  opts = opts or {}
  M.list(function(sessions)
    local items = { { new = true } }
    vim.list_extend(items, sessions)
    vim.ui.select(items, {
      prompt = opts.prompt or "pi sessions",
      format_item = function(item)
        return item.new and "+ Start a new session" or M.describe(item)
      end,
    }, function(item)
      if not item then
        return
      end
      if item.new then
        return M.create(callback)
      end
      M.use(item.uri)
      callback(item.uri)
    end)
  end)
end

-- -- status for the statusline --------------------------------------------------------------

local refreshers = {}

--- Re-read model, thinking level and context size (pi.previewContext); the
--- statusline only reads the cache, so drawing never waits on the server.
function M.refresh_status(uri)
  local key = util.key(uri)
  if not key then
    return
  end
  refreshers[key] = refreshers[key]
    or util.coalesce(function(done)
      client.exec("pi.previewContext", { uri = uri, page = 1 }, function(err, result) -- totals only
        if not err and result then
          local busy = status[key] and status[key].busy or false
          status[key] = {
            model = result.model,
            thinkingLevel = result.thinkingLevel,
            totalTokens = result.totalTokens,
            contextWindow = result.contextWindow,
            busy = busy,
          }
          vim.cmd("redrawstatus!")
        end
        done()
      end, M.root_of(uri))
    end)
  refreshers[key]()
end

function M.status(uri)
  return status[util.key(uri) or ""]
end

function M.set_busy(uri, busy)
  local key = util.key(uri)
  if not key then
    return
  end
  status[key] = status[key] or {}
  status[key].busy = busy
  vim.cmd("redrawstatus!")
end

function M.busy(uri)
  local s = M.status(uri)
  return s ~= nil and s.busy == true
end

--- The session whose turn is running (approval requests do not name one).
function M.busy_uri()
  if M.last_uri and M.busy(M.last_uri) then
    return M.last_uri
  end
  for key, s in pairs(status) do
    if s.busy then
      return vim.uri_from_fname(key)
    end
  end
  return M.last_uri
end

--- The session a pi/turn note is about: a turn whose session moved to a new file goes on
--- naming the old one to its end.
function M.turn_uri(note)
  return moved_turns[note.turnId or ""] or note.uri
end

--- Rename `buf`, leaving no empty buffer of its old name behind (as :file does).
local function rename(buf, name)
  local before = vim.api.nvim_buf_get_name(buf)
  vim.api.nvim_buf_set_name(buf, name)
  for _, other in ipairs(vim.api.nvim_list_bufs()) do
    if other ~= buf and vim.api.nvim_buf_get_name(other) == before and not vim.api.nvim_buf_is_loaded(other) then
      vim.api.nvim_buf_delete(other, { force = true })
    end
  end
end

--- Buffers showing the session of `old` (chat, input, tree, context) name `new` from now on.
local function retarget_buffers(old, new)
  local old_name = vim.fn.fnamemodify(util.key(old), ":t:r")
  local new_name = vim.fn.fnamemodify(util.key(new), ":t:r")
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if util.same(vim.b[buf].pi_lsp_uri, old) then
      vim.b[buf].pi_lsp_uri = new
      -- Renamed too: a view opened later on the old file (a session of its own) gets a new
      -- buffer. Only views named after the session: pi://files/<entry> (a rewind's diff) is
      -- named after its entry, and two of them would get one name (E95).
      local kind = vim.api.nvim_buf_get_name(buf):match("^pi://(%w+)/" .. vim.pesc(old_name) .. "$")
      -- Guarded: a buffer already holding the new name must not stop the move half made.
      if kind and not pcall(rename, buf, ("pi://%s/%s"):format(kind, new_name)) then
        util.warn(("pi://%s/%s kept its name"):format(kind, old_name))
      end
    end
  end
end

--- The session of `old` continues in `new` (another program cut its file short, which is left
--- as it is): what used it (the status, its running turn, the last used, the views) follows,
--- once, whichever of pi/sessionChanged's relocatedFrom and the session_moved event came first.
local function follow_move(old, new)
  local from, to = util.key(old), util.key(new)
  if not from or not to or from == to or moved[from] == to then
    return
  end
  moved[from] = to
  if running[from] then
    moved_turns[running[from]] = new
  end
  running[to], running[from] = running[from], nil
  status[to], status[from] = status[from], nil
  roots[to] = roots[to] or roots[from]
  if util.same(M.last_uri, old) then
    M.last_uri = new
  end
  retarget_buffers(old, new)
  util.notify("session moved to " .. vim.fn.fnamemodify(to, ":t"))
  util.emit("sessionMoved", old, new)
end

--- `require("pi_lsp").statusline()`: model · thinking · tokens/window · busy.
function M.statusline()
  local uri = M.of_buffer(0) or M.last_uri
  local s = uri and M.status(uri)
  if not s or not s.model then
    return ""
  end
  local model = (s.model or ""):gsub("^[^/]*/", "")
  local parts = {
    "π " .. model,
    s.thinkingLevel or "off",
    ("%s/%s"):format(util.short_count(s.totalTokens), util.short_count(s.contextWindow)),
  }
  if s.busy then
    parts[#parts + 1] = "busy"
  end
  -- Drawn as statusline code (the chat's winbar and the documented setup use %{%...%}), and
  -- the model and level come from session files: a `%` there would run as an expression.
  local text = util.one_line(table.concat(parts, " · ")):gsub("%%", "%%%%")
  return text
end

-- -- jobs -------------------------------------------------------------------------------------

--- Call `callback(done)` when pi/jobDone for `job_id` arrives.
function M.on_job(job_id, callback)
  if finished[job_id] then
    local done = finished[job_id]
    finished[job_id] = nil
    return callback(done)
  end
  jobs[job_id] = callback
end

--- A session's title as pi/sessionChanged carries it: a name written since the list was read
--- (a queued :PiRename at its turn's end, the pi CLI's) shows at once, and the list is read
--- again for its name.
local function retitle(change)
  local root = M.root_of(change.uri)
  for _, s in ipairs(M.listed[root] or {}) do
    if util.same(s.uri, change.uri) then
      if change.title and s.title ~= change.title then
        s.title = change.title
        M.list(function() end, root)
      end
      return
    end
  end
end

function M.setup_listeners()
  util.on("jobDone", function(done)
    local callback = jobs[done.jobId]
    jobs[done.jobId] = nil
    if callback then
      callback(done)
    else
      finished[done.jobId] = done
    end
  end)
  util.on("sessionChanged", function(change)
    if change.relocatedFrom then
      follow_move(change.relocatedFrom, change.uri)
    end
    if M.status(change.uri) then
      M.refresh_status(change.uri)
    end
    retitle(change)
  end)
  util.on("sessionsChanged", function()
    -- Read again the lists views take their titles from (a name, a count or a date changed):
    -- the old ones stand until then, where a cleared list had titles fall back to file names.
    for root in pairs(M.listed) do
      M.list(function() end, root)
    end
  end)
  util.on("stopped", function(root)
    -- The server's turns died with it: none of its sessions is busy any more.
    for key, s in pairs(status) do
      if s.busy and (roots[key] or client.root(0)) == root then
        s.busy = false
      end
    end
    vim.cmd("redrawstatus!")
  end)
  util.on("turn", function(note)
    local event = note.event or {}
    local uri = M.turn_uri(note)
    if event.type == "agent_start" then
      running[util.key(uri) or ""] = note.turnId
      M.set_busy(uri, true)
    elseif event.type == "agent_end" or event.type == "error" then
      running[util.key(uri) or ""] = nil
      M.set_busy(uri, false)
      M.refresh_status(uri)
    elseif event.type == "session_moved" and event.path then
      follow_move(note.uri, vim.uri_from_fname(event.path))
    end
  end)
end

--- Command-line completion: names and ids of the listed sessions.
function M.complete(lead)
  local root = client.root(0)
  local sessions = M.listed[root]
  if not sessions or #sessions == 0 then
    local result = client.exec_sync("pi.listSessions", {}, 1500, root)
    sessions = result and result.sessions or {}
    M.listed[root] = sessions
  end
  local out = {}
  for _, s in ipairs(sessions) do
    for _, word in ipairs({ s.name, s.id }) do
      if word and word ~= "" and vim.startswith(word, lead) then
        out[#out + 1] = word
      end
    end
  end
  return out
end

return M
