-- :PiTrust and the question on first use: whether the workspace folder's own
-- .pi/ files are loaded (by pi too: its extensions). Decisions are pi's own
-- (~/.pi/agent/trust.json), so the pi CLI and pi-lsp decide alike.
local client = require("pi_lsp.client")
local util = require("pi_lsp.util")

local M = {}

local asked = {} -- roots asked about in this Neovim

local DECISION = {
  override = "decided for this process",
  restricted = "the editor's restricted mode",
  session = "decided for this Neovim only",
  saved = "saved in pi's trust.json",
  client = "the editor trusts it",
  default = "pi's defaultProjectTrust",
  undecided = "not decided yet",
  noProjectFiles = "nothing in .pi/ to load",
  error = "pi's trust.json cannot be read",
}

--- "trusted: saved in pi's trust.json (/path); .pi/settings.json"
function M.describe(state)
  local files = #state.projectFiles > 0 and table.concat(state.projectFiles, ", ") or "no .pi/ files"
  local where = state.savedPath and (" (" .. state.savedPath .. ")") or ""
  return ("%s: %s%s; %s%s"):format(state.trusted and "trusted" or "not trusted", DECISION[state.decision] or state.decision,
    where, files, state.error and (". " .. state.error) or "")
end

--- pi's choices for a folder, as `pi.setTrust` arguments.
local function choices(path)
  local parent = vim.fs.dirname(path)
  return {
    { label = "Trust", args = { trusted = true } },
    { label = ("Trust parent folder (%s)"):format(parent), args = { trusted = true, parent = true } },
    { label = "Trust (this session only)", args = { trusted = true, save = false } },
    { label = "Do not trust", args = { trusted = false } },
    { label = "Do not trust (this session only)", args = { trusted = false, save = false } },
    { label = "Forget the decision", args = { trusted = vim.NIL } },
  }
end

-- :PiTrust's arguments and what they do.
local WORDS = {
  trust = { trusted = true },
  parent = { trusted = true, parent = true },
  no = { trusted = false },
  forget = { trusted = vim.NIL },
}
M.WORDS = { "trust", "parent", "no", "forget", "show" }

local function set(state, args, root)
  client.run("pi.setTrust", vim.tbl_extend("force", { folderUri = state.folderUri }, args), function(saved)
    util.notify(("%s is %s"):format(util.key(saved.folderUri), M.describe(saved)))
  end, root)
end

local function ask(state, root, prompt)
  local path = util.key(state.folderUri)
  vim.ui.select(choices(path), {
    prompt = prompt or ("Trust project folder %s? (%s)"):format(path, M.describe(state)),
    format_item = function(choice)
      return choice.label
    end,
  }, function(choice)
    if choice then
      set(state, choice.args, root)
    end
  end)
end

--- Each workspace folder's state, then `fn(state)` (several folders: pick one).
local function with_folder(root, fn)
  client.run("pi.trustStatus", {}, function(result)
    local folders = result.folders or {}
    if #folders == 1 then
      return fn(folders[1])
    end
    vim.ui.select(folders, {
      prompt = "pi: which folder?",
      format_item = function(state)
        return util.key(state.folderUri) .. "  " .. M.describe(state)
      end,
    }, function(state)
      if state then
        fn(state)
      end
    end)
  end, root)
end

--- `:PiTrust [trust|parent|no|forget|show]`: decide for the workspace folder
--- (saved in pi's trust.json), or show the decision; no argument asks.
function M.command(arg)
  local root = client.root(0)
  arg = vim.trim(arg or "")
  if arg ~= "" and not vim.tbl_contains(M.WORDS, arg) then
    return util.error(("no :PiTrust %s (one of: %s)"):format(arg, table.concat(M.WORDS, ", ")))
  end
  with_folder(root, function(state)
    if arg == "show" then
      util.notify(("%s is %s"):format(util.key(state.folderUri), M.describe(state)))
    elseif arg ~= "" then
      set(state, WORDS[arg], root)
    else
      ask(state, root)
    end
  end)
end

--- On the first use of a workspace in this Neovim: a folder with .pi/ files to
--- load and no decision yet gets pi's question (until then they stay unloaded).
function M.on_start(root)
  if asked[root] then
    return
  end
  asked[root] = true
  client.run("pi.trustStatus", {}, function(result)
    for _, state in ipairs(result.folders or {}) do
      if state.decision == "undecided" and #state.projectFiles > 0 then
        ask(state, root, ("Trust project folder %s? pi and pi-lsp load its %s only in trusted folders"):format(
          util.key(state.folderUri), table.concat(state.projectFiles, " and ")))
      end
    end
  end, root)
end

return M
