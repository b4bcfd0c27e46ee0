-- A summary's retry wait reaches Neovim where a turn's does: in the LSP progress of the
-- pi-lsp client (vim.lsp.status(), the LspProgress event), for :PiCompact's job.
-- Fake server: a 503 for the first summary request, then summaries.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local client = H.setup()

local WAIT = "Anthropic 503 api_error: Service unavailable; retrying in 0.001s (1/3)"
local reports = {}
vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(event)
    local value = event.data.params.value
    if event.data.client_id == client.id and value.kind == "report" then
      table.insert(reports, value.message)
    end
  end,
})

vim.cmd("PiCompact 5f0c2a9e")
table.insert(H.selects, function(items)
  return items[1] -- "Compact"
end)
H.wait_said("^pi%-lsp: compacted", false, "the compaction job did not finish")
H.check(vim.tbl_contains(reports, WAIT), "the job's progress told the wait: " .. vim.inspect(reports))
H.check(vim.tbl_contains(reports, "compacting the context"), "and the attempt after it: " .. vim.inspect(reports))
H.finish()
