-- setup() outside a project starts nothing; :help pi_lsp works from the
-- shipped tags; :checkhealth pi_lsp reports; :PiChat on a file that is not a
-- session says so plainly, and stop_all while a crashed server's restart is pending leaves
-- it stopped; setup() in a project starts the server.
-- Environment: PI_LSP_EMPTY, a folder with no root marker above it.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.prepare()
local workspace = os.getenv("PI_LSP_WORKSPACE")

--- Clients started, initialized or not (get_clients leaves out the latter).
local function servers()
  return #vim.lsp.get_clients({ name = "pi_lsp", _uninitialized = true })
end

local function health_report()
  vim.cmd("checkhealth pi_lsp")
  local text = H.text(0)
  vim.cmd("bwipeout!")
  return text
end

-- No root marker here: setup() starts no server.
vim.cmd.cd(os.getenv("PI_LSP_EMPTY"))
require("pi_lsp").setup(H.options())
H.check(servers() == 0, "setup() started a server in a folder without a root marker")
local report = health_report()
for _, needle in ipairs({ "OK Neovim 0.", "OK pi-lsp 0.", "no root marker (.pi, .git) above", "no pi-lsp server is running" }) do
  H.check(report:find(needle, 1, true), "the health report says " .. needle .. ":\n" .. report)
end
H.check(not report:find("ERROR", 1, true), "no errors in the health report:\n" .. report)

-- A server command that cannot run is an error, with what to do.
require("pi_lsp").setup(H.options({ cmd = { "no-such-pi-lsp", "serve" } }))
report = health_report()
H.check(report:find('ERROR "no-such-pi-lsp" is not executable', 1, true), "a missing command is reported:\n" .. report)
-- pi-lsp is not on the package index: the advice is the checkout's `make install`.
H.check(report:find("make install", 1, true) and not report:find("pip install pi-lsp", 1, true), "how to install:\n" .. report)
require("pi_lsp").setup(H.options({ cmd = { os.getenv("PI_LSP_PYTHON"), "-m", "no_such_module", "serve" } }))
report = health_report()
H.check(report:find("ERROR .* does not run: .*No module named no_such_module"), "a command that fails is reported:\n" .. report)

-- :help works: the shipped tags are what :helptags makes of the doc.
local copy = vim.fn.tempname()
vim.fn.mkdir(copy, "p")
vim.fn.writefile(vim.fn.readfile(H.plugin_dir .. "/doc/pi_lsp.txt"), copy .. "/pi_lsp.txt")
vim.cmd.helptags(vim.fn.fnameescape(copy))
H.check(
  vim.deep_equal(vim.fn.readfile(copy .. "/tags"), vim.fn.readfile(H.plugin_dir .. "/doc/tags")),
  "doc/tags is out of date: run  nvim --headless -c 'helptags editors/nvim/doc' -c q"
)
local doc = table.concat(vim.fn.readfile(H.plugin_dir .. "/doc/pi_lsp.txt"), "\n")
H.check(doc:find("`make install`", 1, true) and not doc:find("pip install pi-lsp", 1, true), ":help pi_lsp-setup says how to install")
for _, topic in ipairs({ "pi_lsp", ":PiModel", ":PiCheck", "pi_lsp-health" }) do
  vim.cmd.help(topic)
  H.check(vim.bo.filetype == "help" and vim.api.nvim_buf_get_name(0):find("doc/pi_lsp.txt$"), ":help " .. topic)
  vim.cmd("helpclose")
end

-- In the workspace: a .jsonl that is not a session gets one plain message.
require("pi_lsp").setup(H.options())
vim.cmd.cd(workspace)
local notes = workspace .. "/.pi/sessions/notes.jsonl"
vim.fn.writefile({ '{"hello": "world"}' }, notes)
vim.cmd.edit(vim.fn.fnameescape(notes))
-- (An error message inside vim.cmd raises under `nvim -l`; a user just sees it.)
pcall(vim.cmd, "PiChat")
H.check(H.said(".pi/sessions/notes.jsonl is not a pi session file (its first entry is not a session header)"), "the refusal: " .. table.concat(H.messages, " | "))
H.check(not H.find_buf("pi://chat/"), "no chat opened for it")
H.check(not table.concat(H.messages, "\n"):find("NotASessionError", 1, true), "no raw error")
-- The server names it as plainly (for files the plugin cannot tell apart).
local client = require("pi_lsp").client()
H.wait(function()
  return client.initialized
end, "the server did not initialize", nil, H.PROCESS_CEILING_MS)
local response = client:request_sync("workspace/executeCommand", {
  command = "pi.getTree",
  arguments = { { uri = vim.uri_from_fname(notes) } },
}, H.CEILING_MS)
H.check(response.err and response.err.message:find("notes.jsonl is not a pi session file", 1, true), vim.inspect(response))

-- stop_all while a crashed server's restart is pending (here: from a "stopped" listener) left it
-- stopped no more: the restart came after it, a server nobody stops. No view is open here (one
-- with a refresh queued starts a server on demand, as any call does) and no crash counted yet
-- (a fourth in three minutes restarts nothing).
local stopped
local unlisten = require("pi_lsp.util").on("stopped", function()
  stopped = true
  require("pi_lsp.client").stop_all()
end)
for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
  vim.uv.kill(pid, "sigkill")
end
H.wait(function()
  return stopped
end, "the killed server was not seen to stop")
unlisten()
-- A restart starts in the callback that said "stopped", so it would be here by now.
local restarted = vim.tbl_filter(function(c)
  return not c:is_stopped()
end, vim.lsp.get_clients({ name = "pi_lsp", _uninitialized = true }))
H.check(#restarted == 0, "a server started after stop_all: " .. #restarted)

-- A server that exits before it is ready: calls made meanwhile get an error, none waits forever.
require("pi_lsp.client").stop_all()
H.wait(function()
  return servers() == 0
end, "the server did not stop")
require("pi_lsp").setup(H.options({ cmd = { os.getenv("PI_LSP_PYTHON"), "-c", "import sys; sys.exit(3)" } }))
local answered
require("pi_lsp.client").exec("pi.listSessions", {}, function(err)
  answered = err or "no error"
end, workspace)
H.wait(function()
  return answered ~= nil
end, "a call made before the server was ready was never answered")
H.check(type(answered) == "table" and answered.message == "the pi-lsp server stopped before it was ready", vim.inspect(answered))
vim.cmd("PiSessions")
H.wait(function()
  return H.said("pi.listSessions: the pi-lsp server stopped before it was ready")
end, "the sessions view did not say the server stopped: " .. table.concat(H.messages, " | "))

-- Why it stopped is said once, with the command and its last stderr line; nothing restarts it.
-- (It used to be said nowhere: only nvim's "quit with exit code 1", pointing at its log.)
local broken = { os.getenv("PI_LSP_PYTHON"), "-c", "import sys; sys.exit('Traceback\\nImportError: no pi_lsp here')" }
require("pi_lsp").setup(H.options({ cmd = broken }))
local explained = ("pi-lsp: the server for %s stopped before it was ready: `%s` exited with code 1: ImportError: no pi_lsp here")
  :format(workspace, table.concat(broken, " "))
local function reports()
  return #vim.tbl_filter(function(message)
    return message == explained
  end, H.messages)
end
vim.cmd("PiSessions")
H.wait(function()
  return reports() > 0
end, "the early stop was not explained: " .. table.concat(H.messages, " | "))
local running = vim.tbl_filter(function(c)
  return not c:is_stopped()
end, vim.lsp.get_clients({ name = "pi_lsp", _uninitialized = true }))
H.check(reports() == 1 and #running == 0, ("said %d times, %d servers started again"):format(reports(), #running))

-- setup() in a marked workspace starts the server. The workspace (a cloned repository, say)
-- plants its own `pi_lsp/` package: `python -m` (here without -P, as older docs said) imports
-- from its working directory, which is the plugin's folder, never the workspace (nvim's cwd).
local planted = vim.fn.fnamemodify(workspace, ":h") .. "/planted-package-ran"
vim.fn.mkdir(workspace .. "/pi_lsp", "p")
vim.fn.writefile({ ("open(%q, 'w').close()"):format(planted) }, workspace .. "/pi_lsp/__init__.py")
vim.cmd.enew()
require("pi_lsp.client").stop_all()
H.wait(function()
  return servers() == 0
end, "the server did not stop")
require("pi_lsp").setup(H.options({ cmd = { os.getenv("PI_LSP_PYTHON"), "-m", "pi_lsp.cli", "serve" } }))
H.check(servers() == 1, "setup() in the workspace starts a server: " .. servers())
H.wait(function()
  return vim.lsp.get_clients({ name = "pi_lsp" })[1] ~= nil
end, "the server did not initialize")
local cmd_cwd = vim.lsp.get_clients({ name = "pi_lsp" })[1].config.cmd_cwd
H.check(cmd_cwd and vim.fn.isdirectory(cmd_cwd) == 1, "the server runs in a folder of its own: " .. tostring(cmd_cwd))
H.check(not vim.startswith(vim.fs.normalize(cmd_cwd) .. "/", workspace .. "/"), "the server runs outside the workspace: " .. cmd_cwd)
report = health_report()
H.check(report:find("OK workspace " .. workspace .. " (has .pi)", 1, true), "the workspace is reported:\n" .. report)
H.check(report:find("OK server running for " .. workspace, 1, true), "the server is reported:\n" .. report)
H.check(report:find("OK pi-lsp 0.", 1, true), "the health probe ran our pi-lsp:\n" .. report)
H.check(vim.fn.filereadable(planted) == 0, "the workspace's pi_lsp/__init__.py ran")

H.finish()
