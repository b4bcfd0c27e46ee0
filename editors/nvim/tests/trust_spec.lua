-- The workspace has its own .pi/settings.json (another default model) and no
-- trust decision: the first use asks, and the settings stay out until the
-- folder is trusted; :PiTrust shows and saves pi's decisions in trust.json.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")

H.prepare()
local asked
table.insert(H.selects, function(items, opts)
  asked = opts.prompt
  H.check(vim.deep_equal(vim.tbl_map(function(i)
    return i.label:gsub(" %(/.*%)$", "")
  end, items), { "Trust", "Trust parent folder", "Trust (this session only)", "Do not trust",
    "Do not trust (this session only)", "Forget the decision" }), "pi's choices: " .. vim.inspect(items))
  return items[5] -- Do not trust (this session only)
end)
vim.cmd.cd(os.getenv("PI_LSP_WORKSPACE"))
require("pi_lsp").setup(H.options())
H.wait(function()
  return asked ~= nil
end, "the first use did not ask about the folder's .pi/ files")
H.check(asked:find("Trust project folder", 1, true) and asked:find(".pi/settings.json", 1, true), "the question: " .. asked)

local client = require("pi_lsp.client")
local function default_model()
  return (client.exec_sync("pi.listModels", {}, 5000) or {}).default
end
local store = os.getenv("PI_CODING_AGENT_DIR") .. "/trust.json"
local folder = vim.uv.fs_realpath(vim.fn.getcwd())
local function saved()
  if vim.fn.filereadable(store) == 0 then
    return nil
  end
  return vim.json.decode(table.concat(vim.fn.readfile(store), "\n"))[folder]
end
local function told(text)
  for _, message in ipairs(H.messages) do
    if message:find(text, 1, true) then
      return true
    end
  end
  return false
end

H.wait(function()
  return told("not trusted: decided for this Neovim only")
end, "the answer was not confirmed")
H.check(default_model() == "anthropic/claude-opus-5-5", "the folder's settings are not loaded: " .. tostring(default_model()))
H.check(saved() == nil, "a choice for this session only is not saved")

vim.cmd("PiTrust show")
H.wait(function()
  return told(folder .. " is not trusted: decided for this Neovim only; .pi/settings.json")
    or told(vim.fn.getcwd() .. " is not trusted: decided for this Neovim only; .pi/settings.json")
end, ":PiTrust show")

table.insert(H.selects, function(items)
  return items[1] -- Trust
end)
vim.cmd("PiTrust")
H.wait(function()
  return saved() == true
end, "Trust was not saved in pi's trust.json")
H.wait(function()
  return default_model() == "anthropic/claude-opus-4-5"
end, "the folder's settings are loaded once it is trusted")

vim.cmd("PiTrust no")
H.wait(function()
  return saved() == false
end, ":PiTrust no was not saved")
H.check(default_model() == "anthropic/claude-opus-5-5", "a folder not trusted loads nothing")

pcall(vim.cmd, "PiTrust maybe") -- an error notification fails the command in headless mode
H.check(told("no :PiTrust maybe (one of: trust, parent, no, forget, show)"), "a wrong argument is named")
H.finish()
