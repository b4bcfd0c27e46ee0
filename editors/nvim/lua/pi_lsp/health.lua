-- :checkhealth pi_lsp — what the plugin needs, checked where it can go wrong:
-- the Neovim version, the server command, the running server, the workspace.
local client = require("pi_lsp.client")
local config = require("pi_lsp.config")

local M = {}

local health = vim.health

local function check_nvim()
  local version = tostring(vim.version())
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. version)
  else
    health.error("Neovim " .. version .. ": pi-lsp needs 0.10 or newer")
  end
end

--- The server command with `serve` (and what follows) replaced by `--version`.
local function version_command(cmd)
  for i, word in ipairs(cmd) do
    if word == "serve" then
      local out = vim.list_slice(cmd, 1, i - 1)
      out[#out + 1] = "--version"
      return out
    end
  end
  return nil
end

local function check_command()
  local cmd = config.options.cmd
  local shown = table.concat(cmd, " ")
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(("%q is not executable (cmd = %s)"):format(cmd[1], shown), {
      "pi-lsp is not on the package index: install it from a checkout with `make install` (its own virtualenv, `pi-lsp` in ~/.local/bin), or `pipx install` the wheel `make wheel` builds in dist/",
      'or set `cmd` in setup(), e.g. { "/path/to/pi-lsp/.venv/bin/python", "-P", "-m", "pi_lsp.cli", "serve" } for a checkout\'s `make .venv/.installed`',
    })
    return
  end
  local probe = version_command(cmd)
  if not probe then
    health.ok(("%s is executable (no `serve` in cmd, so its version is not asked)"):format(cmd[1]))
    return
  end
  local ok, result = pcall(function()
    return vim.system(probe, { text = true, cwd = client.cmd_cwd, env = config.options.cmd_env }):wait(10000)
  end)
  if ok and result.code == 0 then
    health.ok(("%s (%s)"):format(vim.trim(result.stdout), shown))
  else
    local detail = ok and vim.trim(result.stderr ~= "" and result.stderr or ("exit " .. result.code)) or tostring(result)
    health.error(("%s does not run: %s"):format(table.concat(probe, " "), detail), {
      "the command must start pi-lsp; check the Python it runs has pi-lsp installed",
    })
  end
end

local function check_workspace()
  local root = client.marked_root(0)
  local markers = table.concat(config.options.root_markers, ", ")
  if not root then
    health.warn(("no root marker (%s) above %s: setup() starts no server here"):format(markers, vim.fn.getcwd()), {
      "open a file of a project, or :cd into one; a :Pi command uses the cwd as the workspace",
    })
    root = vim.fn.getcwd()
  elseif vim.fn.isdirectory(root .. "/.pi") == 1 then
    health.ok("workspace " .. root .. " (has .pi)")
  else
    health.info("workspace " .. root .. ": no .pi yet (the first session creates .pi/sessions)")
  end
  local running = vim.lsp.get_clients({ name = client.NAME, _uninitialized = true })
  for _, c in ipairs(running) do
    if c.root_dir == root or (c.config and c.config.root_dir == root) then
      local state = c.initialized and "running" or "starting"
      health.ok(("server %s for %s (client %d)"):format(state, root, c.id))
      return
    end
  end
  if #running > 0 then
    health.info(("no server for %s; %d for other workspaces"):format(root, #running))
  else
    health.warn("no pi-lsp server is running", { "it starts at setup() in a marked workspace, or at the first :Pi command" })
  end
end

function M.check()
  health.start("pi-lsp")
  check_nvim()
  check_command()
  check_workspace()
end

return M
