-- pi-lsp for Neovim: a thin client of the pi-lsp language server. Every
-- session operation is a server command; this plugin only shows results and
-- turns keys into commands. See :help pi_lsp.
-- This module is the top layer: it wires the modules below it (the client
-- knows no view; the chat asks for the tree, which sits above it, through
-- the bus), so no module requires one that requires it back.
local config = require("pi_lsp.config")
local util = require("pi_lsp.util")

local M = {}

local listening = false

local function define_highlights()
  local links = {
    PiTreeId = "Comment",
    PiTreePath = "Special",
    PiTreeLabel = "Label",
    PiTreeLeaf = "Title",
  }
  for group, target in pairs(links) do
    vim.api.nvim_set_hl(0, group, { link = target, default = true })
  end
end

-- What the lower modules hand upward: the server's requests, a started
-- server, the tree asked for by the chat; and the views' own listeners.
local function wire()
  local client = require("pi_lsp.client")
  local chat = require("pi_lsp.chat")
  local editor = require("pi_lsp.editor")
  client.answer("window/showMessageRequest", chat.approve)
  client.answer("pi/approveTool", editor.approve_tool, editor.CAPABILITIES)
  client.answer("pi/diagnostics", editor.diagnostics, editor.CAPABILITIES)
  util.on("initialized", function(root, started)
    require("pi_lsp.trust").on_start(root)
    -- Open file buffers are synced: the agent reads their unsaved text and
    -- edits them through workspace/applyEdit.
    editor.sync_buffers(started, root)
  end)
  util.on("openTree", function(uri)
    require("pi_lsp.tree").open(uri)
  end)
  require("pi_lsp.session").setup_listeners()
  chat.setup_listeners()
end

--- Configure pi-lsp and (unless autostart = false) start the server for the
--- current workspace, if one of `root_markers` marks it: a folder without
--- one gets a server only when a command asks. Calling it again replaces
--- the options.
function M.setup(opts)
  if vim.fn.has("nvim-0.10") ~= 1 then
    vim.notify("pi-lsp needs Neovim 0.10 or newer", vim.log.levels.ERROR)
    return
  end
  config.set(opts)
  define_highlights()
  if not listening then
    listening = true
    wire()
  end
  M.configured = true
  local client = require("pi_lsp.client")
  local root = config.options.autostart and client.marked_root(0)
  if root then
    client.get(root)
  end
end

--- Commands call this so the plugin works without an explicit setup().
function M.ensure_setup()
  if not M.configured then
    M.setup({})
  end
end

-- The user commands' entry points: each makes sure of setup, then hands its argument on.
local entry_points = {
  tree = { "pi_lsp.tree", "command" },
  chat = { "pi_lsp.chat", "command" },
  context = { "pi_lsp.context", "command" },
  compact = { "pi_lsp.context", "compact_command" },
  model = { "pi_lsp.settings", "model" },
  thinking = { "pi_lsp.settings", "thinking" },
  rename = { "pi_lsp.settings", "rename" },
  check = { "pi_lsp.settings", "check" },
  trust = { "pi_lsp.trust", "command" },
}
for name, target in pairs(entry_points) do
  M[name] = function(arg)
    M.ensure_setup()
    require(target[1])[target[2]](arg)
  end
end

--- `:PiSessions`: pick, then open what `open` says (a new session opens the chat).
function M.sessions()
  M.ensure_setup()
  require("pi_lsp.session").pick(function(uri, created)
    -- A new session has no tree to look at yet: the chat is where to start.
    local open = created and "chat" or config.options.open
    if open == "tree" then
      require("pi_lsp.tree").open(uri)
    elseif open == "chat" then
      require("pi_lsp.chat").open(uri)
    end
  end)
end

--- For 'statusline' / 'winbar': "π claude-opus-4-5 · high · 8.1k/200k · busy"
--- for the current buffer's session (or the session last used); "" if none.
--- Reads a cache only, so it is cheap to call on every redraw.
function M.statusline()
  return require("pi_lsp.session").statusline()
end

--- The running client for the current workspace, if any.
function M.client()
  return require("pi_lsp.client").get()
end

return M
