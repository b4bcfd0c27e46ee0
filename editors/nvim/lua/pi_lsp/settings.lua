-- :PiModel, :PiThinking, :PiRename and :PiCheck: the session's model,
-- thinking level and name, and its integrity report. One server command each.
local client = require("pi_lsp.client")
local session = require("pi_lsp.session")
local util = require("pi_lsp.util")

local M = {}

M.THINKING_LEVELS = { "off", "minimal", "low", "medium", "high", "xhigh", "max" }

local function file_name(uri)
  return vim.fn.fnamemodify(util.key(uri), ":t")
end

local function set_model(uri, provider, model_id)
  client.run("pi.setModel", { uri = uri, provider = provider, modelId = model_id }, function()
    util.notify(("model of %s: %s/%s"):format(file_name(uri), provider, model_id))
    session.refresh_status(uri)
  end, session.root_of(uri))
end

--- `:PiModel [provider/id]`: set the model of the session, or pick one from
--- the server's models.
function M.model(arg)
  session.resolve(nil, function(uri)
    if arg and arg ~= "" then
      local provider, model_id = arg:match("^([^/]+)/(.+)$")
      if not provider then
        return util.error(("the model must be PROVIDER/ID (for example anthropic/claude-sonnet-4-5), not %q"):format(arg))
      end
      return set_model(uri, provider, model_id)
    end
    local root = session.root_of(uri)
    client.run("pi.listModels", {}, function(result)
      -- The session's model from the server: the statusline's cache may not be filled yet.
      client.run("pi.previewContext", { uri = uri, page = 1 }, function(preview)
        vim.ui.select(result.models or {}, {
          prompt = "Model for " .. file_name(uri),
          -- One line: the default select hands each to vim.fn.inputlist, which takes NUL for a
          -- Blob; a models.json may name a provider or model with any text.
          format_item = function(m)
            local id = m.provider .. "/" .. m.id
            local name = (m.name and m.name ~= m.id) and (m.name .. " — ") or "" -- models.json's name
            local current = id == preview.model and "  ← current" or ""
            return util.one_line(("%s%s  (%s tokens)%s"):format(name, id, util.short_count(m.contextWindow), current))
          end,
        }, function(choice)
          if choice then
            set_model(uri, choice.provider, choice.id)
          end
        end)
      end, root)
    end, root)
  end)
end

--- The level `pi.setThinkingLevel` recorded for `asked` (pi clamps it to the model's levels),
--- or, queued behind the running turn, that the model in force at its end decides it.
local function level_said(asked, result)
  if result.queued then
    return ("%s from when the running turn ends, or the nearest the model then in force offers"):format(asked)
  end
  return result.level == asked and asked or ("%s (the model offers no %s)"):format(result.level, asked)
end

local function set_thinking(uri, level)
  if not vim.tbl_contains(M.THINKING_LEVELS, level) then
    return util.error(("no thinking level %q (one of: %s)"):format(level, table.concat(M.THINKING_LEVELS, ", ")))
  end
  client.run("pi.setThinkingLevel", { uri = uri, level = level }, function(result)
    util.notify(("thinking level of %s: %s"):format(file_name(uri), level_said(level, result)))
    session.refresh_status(uri)
  end, session.root_of(uri))
end

--- `:PiThinking [level]`: set the thinking level, or pick one of those the session's model
--- offers (as pi's picker does).
function M.thinking(arg)
  session.resolve(nil, function(uri)
    if arg and arg ~= "" then
      return set_thinking(uri, arg)
    end
    client.run("pi.previewContext", { uri = uri, page = 1 }, function(preview)
      vim.ui.select(preview.thinkingLevels or M.THINKING_LEVELS, {
        prompt = "Thinking level for " .. file_name(uri),
        format_item = function(level)
          return level == preview.thinkingLevel and (level .. "  ← current") or level
        end,
      }, function(level)
        if level then
          set_thinking(uri, level)
        end
      end)
    end, session.root_of(uri))
  end)
end

local function current_name(uri)
  for _, s in ipairs(session.listed[session.root_of(uri)] or {}) do
    if util.same(s.uri, uri) then
      return s.name
    end
  end
  return nil
end

local function rename(uri, name)
  name = vim.trim(name)
  if name == "" then
    return util.warn("the name is empty; the session keeps its name")
  end
  local root = session.root_of(uri)
  client.run("pi.setName", { uri = uri, name = name }, function(result)
    if result.queued then
      -- Written at the turn's end: its pi/sessionChanged brings the title then.
      return util.notify(("%s will be named %q when the running turn ends"):format(file_name(uri), name))
    end
    util.notify(("%s is now named %q"):format(file_name(uri), name))
    session.list(function() end, root) -- titles of trees and chats come from the list
  end, root)
end

--- `:PiRename [name]`: name the session (asks when no name is given).
function M.rename(arg)
  session.resolve(nil, function(uri)
    if arg and arg ~= "" then
      return rename(uri, arg)
    end
    -- One line: vim.ui.input hands the default to vim.fn.input, which takes NUL for a Blob.
    vim.ui.input({ prompt = "Name of the session: ", default = util.one_line(current_name(uri) or "") }, function(name)
      if name ~= nil then
        rename(uri, name)
      end
    end)
  end)
end

--- `:PiCheck [session]`: the integrity report in the quickfix list.
function M.check(arg)
  session.resolve(arg, function(uri)
    client.run("pi.check", { uri = uri }, function(result)
      local path = util.key(uri)
      local items = {}
      for _, p in ipairs(result.problems or {}) do
        local entry = (p.entryId and p.entryId ~= vim.NIL) and (" [" .. p.entryId .. "]") or ""
        items[#items + 1] = {
          filename = path,
          lnum = (p.line and p.line ~= vim.NIL) and p.line or 1,
          -- one line, no NUL: a session's ids are as written, and setqflist takes NUL for a Blob
          text = util.one_line(("%s%s: %s"):format(p.kind, entry, p.message)),
          type = "W",
        }
      end
      vim.fn.setqflist({}, " ", { title = "pi check: " .. file_name(uri), items = items })
      if #items == 0 then
        return util.notify(("%s: no problems"):format(file_name(uri)))
      end
      util.warn(("%s: %d problem%s (quickfix list)"):format(file_name(uri), #items, #items == 1 and "" or "s"))
      vim.cmd("copen")
    end, session.root_of(uri))
  end)
end

--- Completion of :PiModel: the server's models as provider/id.
function M.complete_models(lead)
  local result = client.exec_sync("pi.listModels", {}, 1500)
  local out = {}
  for _, m in ipairs(result and result.models or {}) do
    local name = m.provider .. "/" .. m.id
    if vim.startswith(name, lead) then
      out[#out + 1] = name
    end
  end
  return out
end

return M
