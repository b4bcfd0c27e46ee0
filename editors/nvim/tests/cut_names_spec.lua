-- Two sessions whose names differ only past what the server sends of a name are listed with one
-- cut name (ending in "…"): :PiChat with it, as completed, asks which and opens the one picked,
-- never the first listed. PI_LSP_CUT: the name as sent; the newer session is a.jsonl.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local cut = os.getenv("PI_LSP_CUT")
H.check(vim.tbl_contains(require("pi_lsp.session").complete("NNN"), cut), "the cut name is not completed")
local asked, offered
H.selects[1] = function(items, opts)
  asked, offered = opts.prompt, vim.tbl_map(opts.format_item, items)
  return vim.iter(items):find(function(s)
    return vim.endswith(s.uri, "/b.jsonl")
  end)
end
vim.cmd("PiChat " .. cut)
H.wait_buf("pi://chat/b", "text of session B", "B's chat did not open (the first listed, A, did?)")
H.check(asked == ("2 sessions match %q"):format(cut), "asked: " .. tostring(asked))
H.check(offered[1]:find("a.jsonl", 1, true) and offered[2]:find("b.jsonl", 1, true),
  "the choices do not name their files: " .. vim.inspect(offered))
H.finish()
