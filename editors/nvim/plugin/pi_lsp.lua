-- User commands of pi-lsp. Modules load on first use, so startup costs nothing.
if vim.g.loaded_pi_lsp then
  return
end
vim.g.loaded_pi_lsp = true

local function pi()
  return require("pi_lsp")
end

local function complete_sessions(lead)
  pi().ensure_setup()
  return require("pi_lsp.session").complete(lead)
end

--- Entry ids of the tree last shown (no server round trip while typing).
local function complete_entries(lead)
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local view = package.loaded["pi_lsp.tree"] and require("pi_lsp.tree").view(buf)
    for _, node in ipairs(view and view.nodes or {}) do
      if vim.startswith(node.id, lead) then
        out[#out + 1] = node.id
      end
    end
  end
  return out
end

local commands = {
  PiSessions = {
    function()
      pi().sessions()
    end,
    { nargs = 0, desc = "pi: pick a session or start a new one" },
  },
  PiTree = {
    function(o)
      pi().tree(o.args)
    end,
    { nargs = "?", complete = complete_sessions, desc = "pi: the session tree" },
  },
  PiChat = {
    function(o)
      pi().chat(o.args)
    end,
    { nargs = "?", complete = complete_sessions, desc = "pi: chat on the current path" },
  },
  PiContext = {
    function(o)
      pi().context(o.args)
    end,
    { nargs = "?", complete = complete_entries, desc = "pi: preview the context at an entry" },
  },
  PiCompact = {
    function(o)
      pi().compact(o.args)
    end,
    { nargs = "?", complete = complete_sessions, desc = "pi: compact the current branch" },
  },
  PiModel = {
    function(o)
      pi().model(o.args)
    end,
    {
      nargs = "?",
      complete = function(lead)
        pi().ensure_setup()
        return require("pi_lsp.settings").complete_models(lead)
      end,
      desc = "pi: the session's model (picks one without an argument)",
    },
  },
  PiThinking = {
    function(o)
      pi().thinking(o.args)
    end,
    {
      nargs = "?",
      complete = function(lead)
        return vim.tbl_filter(function(level)
          return vim.startswith(level, lead)
        end, require("pi_lsp.settings").THINKING_LEVELS)
      end,
      desc = "pi: the session's thinking level",
    },
  },
  PiRename = {
    function(o)
      pi().rename(o.args)
    end,
    { nargs = "?", desc = "pi: name the session" },
  },
  PiCheck = {
    function(o)
      pi().check(o.args)
    end,
    { nargs = "?", complete = complete_sessions, desc = "pi: check the session file (quickfix list)" },
  },
  PiTrust = {
    function(o)
      pi().trust(o.args)
    end,
    {
      nargs = "?",
      complete = function(lead)
        return vim.tbl_filter(function(word)
          return vim.startswith(word, lead)
        end, require("pi_lsp.trust").WORDS)
      end,
      desc = "pi: trust the workspace folder's .pi/ files (pi's trust.json), or show the decision",
    },
  },
  PiSend = {
    function(o)
      pi().ensure_setup()
      require("pi_lsp.editor").send_command(o.line1, o.line2)
    end,
    { range = true, desc = "pi: send the lines (default: the current one) with the next chat message" },
  },
  PiAddFile = {
    function()
      pi().ensure_setup()
      require("pi_lsp.editor").add_file_command()
    end,
    { nargs = 0, desc = "pi: send the current file with the next chat message" },
  },
}

for name, spec in pairs(commands) do
  vim.api.nvim_create_user_command(name, spec[1], spec[2])
end
