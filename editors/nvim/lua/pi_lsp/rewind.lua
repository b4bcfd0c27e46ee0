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

local function diff_lines(files)
  local lines = {}
  for _, file in ipairs(files) do
    if file.diff and file.diff ~= "" then
      vim.list_extend(lines, vim.split(file.diff, "\n", { plain = true, trimempty = true }))
    else
      lines[#lines + 1] = util.one_line(file.status .. ": " .. file.path) -- a path may hold a line break
    end
  end
  return lines
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
    if #result.files == 0 then
      return util.notify("the files already match entry " .. shown)
    end
    local buf = util.scratch("pi://files/" .. shown, "diff")
    util.set_lines(buf, 0, -1, diff_lines(result.files))
    vim.b[buf].pi_lsp_uri = uri
    util.show(buf, "botright split")
    util.map(buf, "n", "q", function()
      if not pcall(vim.cmd, "close") then
        vim.cmd("enew") -- the last window: show an empty buffer instead
      end
    end, "pi: close the diff")
    local choices = { "Restore", "Cancel" }
    local prompt = ("%sRestore %d file(s) to entry %s?"):format(question or "", #result.files, shown)
    vim.ui.select(choices, { prompt = prompt }, function(choice)
      if choice ~= choices[1] then
        return
      end
      client.run("pi.restoreFiles", { uri = uri, entryId = entry_id }, function(done)
        M.undo_ids[util.key(uri)] = done.undoId
        util.notify(("restored %d file(s) to entry %s%s (U in the tree undoes it)"):format(
          #done.files,
          shown,
          in_buffers(done)
        ))
      end, root)
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
    util.notify(("undid the restore: %d file(s) back as they were%s"):format(#done.files, in_buffers(done)))
  end, root)
end

return M
