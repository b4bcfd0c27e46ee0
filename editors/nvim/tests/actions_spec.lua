-- The other tree keys (edit prompt, branch with summary, fork), the session
-- resolution order (buffer's session file, argument) and :PiCompact.
-- Fake server: text replies for the summaries the server asks for.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local workspace = os.getenv("PI_LSP_WORKSPACE")
local example = vim.fn.glob(workspace .. "/.pi/sessions/*.jsonl")

-- The session file in the current buffer is the session.
vim.cmd.edit(vim.fn.fnameescape(example))
vim.cmd("PiTree")
local tree = H.wait_buf("pi://tree/", "← leaf", "the tree of the buffer's session")
local uri = vim.b[tree].pi_lsp_uri
H.check(vim.uri_to_fname(uri) == vim.fn.fnamemodify(example, ":p"), "the tree shows the edited file: " .. uri)

-- `s`: over to the ORM dead end, with a summary of the main line being left. Its folded
-- rows are fetched as its open fold scrolls into view (a UI fires WinScrolled; headless, here).
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("zR")
vim.api.nvim_win_set_cursor(0, { H.line_of(tree, "more rows"), 0 })
vim.api.nvim_exec_autocmds("WinScrolled", { pattern = tostring(vim.api.nvim_get_current_win()) })
H.wait(function()
  return H.entry(tree, "28511eec") ~= nil
end, "opening the folds did not fetch the dead end's rows", tree)
vim.api.nvim_win_set_cursor(0, { H.entry(tree, "28511eec"), 0 })
table.insert(H.inputs, "")
H.keys("s")
H.wait(function()
  return vim.tbl_contains(H.messages, "pi-lsp: branched to 28511eec with a summary")
end, "the branch summary job did not finish", tree)
H.wait(function()
  local leaf = H.exec("pi.getTree", { uri = uri })
  local node
  for _, n in ipairs(leaf.nodes) do
    if n.id == leaf.leafId then
      node = n
    end
  end
  return node and node.type == "branch_summary" and H.contains(tree, node.id .. " branch_summary:")
end, "the summary entry is the new leaf, shown in the tree", tree)

-- `e` on a prompt: the leaf moves to its parent, the prompt goes to the chat
-- input; a draft the user has not sent there is not dropped unasked.
require("pi_lsp.chat").open(uri)
local input = H.find_buf("pi://input/")
vim.api.nvim_buf_set_lines(input, 0, -1, false, { "my unsent draft" })
local asked
table.insert(H.selects, function(items, opts)
  asked = opts.prompt
  return items[2] -- keep the draft
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, "e1afef94"), 0 })
H.keys("e")
H.wait(function()
  return asked ~= nil
end, "e replaced the draft without asking", input)
H.check(asked == "The chat input holds a draft you have not sent", "the question: " .. asked)
H.check(H.text(input) == "my unsent draft", "the draft was kept", input)
table.insert(H.selects, function(items)
  return items[1] -- replace it
end)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
H.keys("e")
H.wait(function()
  return H.contains(input, "OK, that makes sense. How should we fix the data layer?")
end, "the prompt text did not reach the chat input", input)
H.check(H.exec("pi.getTree", { uri = uri }).leafId == "24652ae8", "the leaf moved to the prompt's parent")

-- `f`: fork at an entry; the fork's tree opens.
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, "24652ae8"), 0 })
H.keys("f")
local fork
H.wait(function()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if buf ~= tree and vim.startswith(name, "pi://tree/") and H.contains(buf, "← leaf") then
      fork = buf
    end
  end
  return fork ~= nil
end, "the fork's tree did not open")
H.check(H.contains(fork, "24652ae8 assistant:") and not H.contains(fork, "28511eec"), "the fork holds the path to 24652ae8", fork)

-- An argument names the session, even though the fork was used last.
vim.cmd("enew")
vim.cmd("PiCompact 5f0c2a9e")
local plan
table.insert(H.selects, function(items)
  return items[1] -- "Compact"
end)
H.wait(function()
  plan = H.find_buf("pi://compact/")
  return plan and H.contains(plan, "# Compaction plan")
end, ":PiCompact did not show the plan", plan)
H.check(vim.b[plan].pi_lsp_uri == uri, ":PiCompact 5f0c2a9e picked the original session")
local to_summarize = H.text(plan):find("messages to summarize: [1-9]") or H.text(plan):find("of a split turn", 1, true)
H.check(to_summarize, "the plan has messages to summarize", plan)
H.wait_said("^pi%-lsp: compacted %([%d,]+ tokens before%)", false, "the compaction job did not finish")
H.dump(":PiCompact", plan)

-- Again at once: the path ends in the compaction. The server's reason is said, not the
-- plugin's own "nothing to compact on this branch" (whatever the refusal was).
local refusal = H.exec("pi.compact", { uri = uri, dryRun = true })
H.check(refusal.plan == nil and refusal.reason:find("^nothing to compact: "), "a refused dry run says why: " .. vim.inspect(refusal))
vim.cmd("PiCompact 5f0c2a9e")
H.wait(function()
  return H.said(refusal.reason)
end, ":PiCompact did not say the server's reason: " .. refusal.reason)

H.finish()
