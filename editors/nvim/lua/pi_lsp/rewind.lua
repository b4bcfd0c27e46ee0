-- Rewinding files: how the workspace differs from an entry's recorded state
-- (a diff in a scratch buffer), restoring it on confirmation, and undoing the
-- last restore. The server keeps the snapshots; this only asks and shows.
local client = require("pi_lsp.client")
local util = require("pi_lsp.util")

local M = {}

M.undo_ids = {} -- session key -> undo id of the last restore made from here

-- Files open in Neovim are restored in their buffers (undoable there), not saved.
local function in_buffers(done)
  local count = done.inEditor and #done.inEditor or 0
  return count > 0 and (", %d in open buffers, not saved"):format(count) or ""
end

-- Why a path is left alone when the server says no more (the CLI's words, pi_lsp/cli_changes.py).
local SKIPPED = "ignored, unreadable, or too large to snapshot"
local REFUSED = "under .git/ or .pi/, or behind a symlink"
local UNRECORDED = "a git repository of its own, whose changes are not recorded or restored"

--- The paths a restore (or its diff) leaves alone, each once with why, one line each: the
--- session's workspace named them.
local function left_alone(result)
  local lines, seen = {}, {}
  local function add(path, reason)
    if not seen[path] then
      seen[path] = true
      lines[#lines + 1] = util.one_line(("left alone (%s): %s"):format(reason, path))
    end
  end
  local why = type(result.why) == "table" and result.why or {}
  for _, path in ipairs(result.skipped or {}) do
    add(path, why[path] or SKIPPED)
  end
  for _, path in ipairs(result.refused or {}) do
    add(path, REFUSED)
  end
  for _, path in ipairs(result.unrecorded or {}) do
    add(path, UNRECORDED)
  end
  return lines
end

-- How many files a restore left alone, after its message's other counts ("" for none).
local function left_alone_count(done, see)
  local count = #left_alone(done)
  return count > 0 and ("; %d left alone%s"):format(count, see) or ""
end

local function diff_lines(files, alone)
  local lines = {}
  for _, file in ipairs(files) do
    if file.diff and file.diff ~= "" then
      vim.list_extend(lines, vim.split(file.diff, "\n", { plain = true, trimempty = true }))
    else
      lines[#lines + 1] = util.one_line(file.status .. ": " .. file.path) -- a path may hold a line break
    end
  end
  return vim.list_extend(lines, alone)
end

--- Show the diff a restore to `entry_id` would make, ask, then restore.
--- `question` leads the prompt (after a branch: "The files differ. Restore …").
function M.offer(uri, entry_id, root, question)
  -- One line: the default vim.ui.select hands the prompt to vim.fn.inputlist, which takes NUL
  -- for a Blob; a buffer's name ends at a NUL.
  local shown = util.one_line(entry_id)
  client.run("pi.fileChanges", { uri = uri, entryId = entry_id }, function(result)
    if not result.available then
      return util.warn("no files to restore at " .. shown .. ": " .. tostring(result.reason))
    end
    local files = result.files or {} -- the server leaves out an empty list
    local alone = left_alone(result)
    if #files == 0 and #alone == 0 then
      return util.notify("the files already match entry " .. shown)
    end
    local buf = util.scratch("pi://files/" .. shown, "diff")
    util.set_lines(buf, 0, -1, diff_lines(files, alone))
    vim.b[buf].pi_lsp_uri = uri
    util.show(buf, "botright split")
    util.map(buf, "n", "q", function()
      util.close_window()
    end, "pi: close the diff")
    if #files == 0 then
      return util.notify(("nothing to restore to entry %s; %d file(s) left alone, listed in the diff"):format(
        shown,
        #alone
      ))
    end
    local choices = { "Restore", "Cancel" }
    local prompt = ("%sRestore %d file(s) to entry %s?"):format(question or "", #files, shown)
    vim.ui.select(choices, { prompt = prompt }, function(choice)
      if choice ~= choices[1] then
        return
      end
      client.run("pi.restoreFiles", { uri = uri, entryId = entry_id }, function(done)
        M.undo_ids[util.key(uri)] = done.undoId
        util.notify(("restored %d file(s) to entry %s%s%s (U in the tree undoes it)"):format(
          #done.files,
          shown,
          in_buffers(done),
          left_alone_count(done, ", see the diff")
        ))
      end, root, function(err)
        -- A restore stopped part-way tells its undo id in the error's data: `U` undoes it.
        local undo_id = type(err) == "table" and type(err.data) == "table" and err.data.undoId
        if type(undo_id) == "string" then
          M.undo_ids[util.key(uri)] = undo_id
        end
      end)
    end)
  end, root)
end

--- Undo the last restore made from this editor for the session.
function M.undo(uri, root)
  local undo_id = M.undo_ids[util.key(uri)]
  if not undo_id then
    return util.warn("no restore of files to undo for this session")
  end
  client.run("pi.restoreFiles", { uri = uri, undoId = undo_id }, function(done)
    M.undo_ids[util.key(uri)] = nil
    util.notify(("undid the restore: %d file(s) back as they were%s%s"):format(
      #done.files,
      in_buffers(done),
      left_alone_count(done, "")
    ))
  end, root)
end

return M
