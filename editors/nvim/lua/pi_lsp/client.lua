-- The language client: one pi-lsp process per workspace root, started with
-- vim.lsp, and `exec` to run the server's pi.* commands. Server notifications
-- are re-emitted on the util bus for the views; server requests go to the
-- answer registered for them (init.lua wires both), so this transport knows
-- nothing of the modules above it.
local config = require("pi_lsp.config")
local util = require("pi_lsp.util")

local M = {}

M.NAME = "pi_lsp"
local clients = {} -- root -> client id
local waiting = {} -- client id -> calls made before the server was initialized: { run, fail }
local in_flight = {} -- client id -> set of the answers to requests sent and not answered yet
local answers = {} -- server request method -> fn(params) that answers it
local ready = {} -- client id -> true once initialized
local stopping = {} -- client id -> true when stopped on purpose
local stops = 0 -- how many times stop_all ran: a crash seen before the last one restarts nothing
local crashes = {} -- root -> when its server stopped unasked, ready or not (uv.now() ms)
local log_from = {} -- client id -> the size of vim.lsp's log when its server started
-- As VS Code's client: a server that crashes again and again is left stopped.
local RESTART_LIMIT, RESTART_WINDOW_MS = 3, 3 * 60 * 1000
local claims = {} -- capabilities the registered answers let the client claim

--- The nearest folder holding one of `root_markers`, looking upward from a
--- file buffer's path (anything else: from the cwd); nil if there is none.
function M.marked_root(buf)
  buf = buf or 0
  local markers = config.options.root_markers
  local name = vim.api.nvim_buf_get_name(buf)
  local start = (name ~= "" and not name:match("^%a+://")) and vim.fs.dirname(name) or vim.fn.getcwd()
  if vim.fs.root then
    return vim.fs.root(start, markers)
  end
  local found = vim.fs.find(markers, { path = start, upward = true })[1]
  return found and vim.fs.dirname(found)
end

--- The workspace root for a buffer: a pi view remembers its root; else the
--- marked root; else (a command asked for explicitly) the cwd.
function M.root(buf)
  buf = buf or 0
  return vim.b[buf].pi_lsp_root or M.marked_root(buf) or vim.fn.getcwd()
end

--- Answer the server's `method` requests with `fn(params)`; `capabilities`:
--- what the client tells servers it starts from now on, because it answers them.
function M.answer(method, fn, capabilities)
  answers[method] = fn
  claims = vim.tbl_deep_extend("force", claims, capabilities or {})
end

-- Server-to-client traffic: notifications go to the bus, requests to their
-- registered answers (which may wait for the user).
local function handlers()
  local function relay(event)
    return function(_, params, ctx)
      util.emit(event, params or {}, ctx and ctx.client_id)
    end
  end
  local out = {
    ["pi/sessionsChanged"] = relay("sessionsChanged"),
    ["pi/sessionChanged"] = relay("sessionChanged"),
    ["pi/turn"] = relay("turn"),
    ["pi/jobDone"] = relay("jobDone"),
  }
  for method, fn in pairs(answers) do
    out[method] = function(_, params)
      return fn(params)
    end
  end
  return out
end

--- An empty Lua table encodes as a JSON array; the server wants objects.
local function object(value)
  if type(value) ~= "table" or next(value) == nil then
    return vim.empty_dict()
  end
  return value
end

local function flush_waiting(client)
  local calls = waiting[client.id] or {}
  waiting[client.id] = nil
  for _, call in ipairs(calls) do
    call.run(client)
  end
end

--- Where the server (and :checkhealth's probe of it) runs: this plugin's own folder, which is
--- always there and never the workspace, where `python -m` and a relative PATH entry would
--- run the repository's own files. The server gets the root from `workspace_folders`.
M.cmd_cwd = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")

local start

--- The crashes of `root`'s server in the last RESTART_WINDOW_MS, with one more at `now`.
local function count_crash(root, now)
  local recent = vim.tbl_filter(function(at)
    return now - at < RESTART_WINDOW_MS
  end, crashes[root] or {})
  table.insert(recent, now)
  crashes[root] = recent
  return #recent
end

--- Start the server of `root` again after a crash, unless it crashed too often lately: its
--- views follow their sessions again (they fetch anew on "initialized").
local function restart_after_crash(root)
  local count = count_crash(root, vim.uv.now())
  if clients[root] then
    return -- a command started it already
  end
  if count > RESTART_LIMIT then
    util.error(("the server for %s stopped %d times in %d minutes; the next command starts it again"):format(
      root, count, RESTART_WINDOW_MS / 60000))
    return
  end
  M.get(root)
end

--- The last line a server wrote to stderr: vim.lsp keeps none but logs it, as
--- `"rpc" <cmd[1]> "stderr" <chunk as a Lua string>`; read from `offset` (its start) on.
local function last_stderr_line(cmd, offset)
  local file = io.open(vim.lsp.get_log_path(), "rb")
  if not file then
    return nil
  end
  -- Only the end can hold the last line; a verbose log may have grown by megabytes.
  local size = file:seek("end")
  file:seek("set", math.max(offset, size - 65536))
  local text = file:read("*a") or ""
  file:close()
  local marker = "\t" .. vim.pesc(vim.inspect(cmd[1])) .. '\t"stderr"\t("[^\n]*")\n'
  local chunks = {}
  for literal in text:gmatch(marker) do
    local decode = load("return " .. literal, "stderr", "t", {})
    local ok, chunk = pcall(decode or error)
    chunks[#chunks + 1] = ok and type(chunk) == "string" and chunk or literal
  end
  local lines = vim.tbl_filter(function(line)
    return vim.trim(line) ~= ""
  end, vim.split(table.concat(chunks), "\n", { plain = true }))
  return lines[#lines] and vim.trim(lines[#lines])
end

--- A server that stopped before it was ready counts as a crash but is not started again (it
--- would only stop again): one message says so, with the command and its last stderr line.
local function failed_start(root, cmd, code, signal, offset)
  count_crash(root, vim.uv.now())
  local how = signal ~= 0 and ("was killed by signal %d"):format(signal) or ("exited with code %d"):format(code)
  local said = last_stderr_line(cmd, offset)
  util.error(("the server for %s stopped before it was ready: `%s` %s%s"):format(
    root, table.concat(cmd, " "), how, said and (": " .. said) or " and wrote nothing on stderr"))
end

start = function(root)
  local opts = config.options
  local cfg = {
    name = M.NAME,
    cmd = opts.cmd,
    cmd_cwd = M.cmd_cwd,
    cmd_env = opts.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fs.basename(root) } },
    init_options = object(opts.settings),
    handlers = handlers(),
    capabilities = vim.tbl_deep_extend("force", vim.lsp.protocol.make_client_capabilities(), claims),
    -- The server creates its session hub on `initialized`, which nvim sends
    -- just before on_init runs: only now may commands go out.
    on_init = function(client)
      ready[client.id] = true
      vim.schedule(function()
        flush_waiting(client)
        util.emit("initialized", root, client)
      end)
    end,
    on_exit = function(code, signal, client_id)
      local crashed = ready[client_id] and not stopping[client_id] and (code ~= 0 or signal ~= 0)
      local stops_then = stops
      local never_ready = not ready[client_id] and not stopping[client_id]
      local offset = log_from[client_id]
      ready[client_id], stopping[client_id], log_from[client_id] = nil, nil, nil
      for r, id in pairs(clients) do
        if id == client_id then
          clients[r] = nil
        end
      end
      -- Calls queued for a server that never got ready and requests in flight are never
      -- answered: each gets an error, so no view waits for one. A turn that was running
      -- ended with the process, with no agent_end.
      local queued = waiting[client_id] or {}
      waiting[client_id] = nil
      local calls = in_flight[client_id] or {}
      in_flight[client_id] = nil
      vim.schedule(function()
        for _, call in ipairs(queued) do
          call.fail({ message = "the pi-lsp server stopped before it was ready" })
        end
        for _, answer in pairs(calls) do
          answer({ message = "the pi-lsp server stopped" })
        end
        util.emit("stopped", root)
        -- stop_all since the exit (a "stopped" listener, nvim exiting) leaves it stopped.
        if vim.v.exiting ~= vim.NIL or stops ~= stops_then then
          return
        elseif crashed then
          restart_after_crash(root)
        elseif never_ready then
          failed_start(root, opts.cmd, code, signal, offset or 0)
        end
      end)
    end,
  }
  local log = vim.uv.fs_stat(vim.lsp.get_log_path())
  local id
  if util.has_011 then
    id = vim.lsp.start(cfg, { attach = false })
  else
    -- 0.10's vim.lsp.start always attaches the current buffer; start_client does not.
    id = vim.lsp.start_client(cfg)
  end
  if id then
    clients[root], log_from[id] = id, log and log.size or 0
  end
  return id
end

local function stopped(client)
  if util.has_011 then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- The client for `root` (default: the current buffer's), started if needed.
function M.get(root)
  root = root or M.root(0)
  local id = clients[root]
  local client = id and vim.lsp.get_client_by_id(id)
  if client and not stopped(client) then
    return client, root
  end
  if vim.fn.executable(config.options.cmd[1]) ~= 1 then
    util.error(("cannot start the server: %q is not executable (set `cmd` in setup())"):format(config.options.cmd[1]))
    return nil, root
  end
  id = start(root)
  return id and vim.lsp.get_client_by_id(id), root
end

--- Call `fn(client)` once the client for `root` is initialized, or `fail(err)` if its
--- server stops first.
local function with_client(root, fn, fail)
  local client = M.get(root)
  if not client then
    return
  end
  if client.initialized then
    fn(client)
  else
    waiting[client.id] = waiting[client.id] or {}
    table.insert(waiting[client.id], { run = fn, fail = fail })
  end
end

local function request(client, method, params, handler)
  if util.has_011 then
    return client:request(method, params, handler)
  end
  return client.request(method, params, handler)
end

--- Run the server command `command` with one object argument.
--- `callback(err, result)`; without a callback, errors are reported.
function M.exec(command, args, callback, root)
  local function finish(err, result)
    if callback then
      callback(err, result)
    elseif err then
      util.error(("%s: %s"):format(command, err.message or tostring(err)))
    end
  end
  with_client(root, function(client)
    local params = { command = command, arguments = { object(args) } }
    local calls = in_flight[client.id] or {}
    in_flight[client.id] = calls
    local answer
    answer = function(err, result)
      if not calls[answer] then
        return -- answered already: the server stopped first
      end
      calls[answer] = nil
      finish(err, result)
    end
    calls[answer] = answer
    request(client, "workspace/executeCommand", params, answer)
  end, finish)
end

--- Like exec, but report errors and call `on_result(result)` only on success;
--- `on_error(err)`, if given, also gets an error before it is reported.
function M.run(command, args, on_result, root, on_error)
  M.exec(command, args, function(err, result)
    if err then
      if on_error then
        on_error(err)
      end
      util.error(("%s: %s"):format(command, err.message or tostring(err)))
    elseif on_result then
      on_result(result or {})
    end
  end, root)
end

--- A blocking call for places that must answer at once (command-line
--- completion). nil on timeout or error.
function M.exec_sync(command, args, timeout_ms, root)
  local client = M.get(root)
  if not client then
    return nil
  end
  if not vim.wait(timeout_ms or 2000, function()
    return client.initialized == true
  end, 20) then
    return nil
  end
  local params = { command = command, arguments = { object(args) } }
  local response
  if util.has_011 then
    response = client:request_sync("workspace/executeCommand", params, timeout_ms or 2000)
  else
    response = client.request_sync("workspace/executeCommand", params, timeout_ms or 2000)
  end
  return response and not response.err and response.result or nil
end

function M.stop_all()
  stops = stops + 1
  for root, id in pairs(clients) do
    local client = vim.lsp.get_client_by_id(id)
    if client then
      stopping[id] = true
      if util.has_011 then
        client:stop()
      else
        client.stop()
      end
    end
    clients[root] = nil
  end
end

return M
