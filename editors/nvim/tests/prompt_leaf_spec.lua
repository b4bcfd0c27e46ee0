-- Branch Here (`b`) on a prompt that is the leaf (no reply yet) stays there, as pi 1.6's /tree
-- does ("Already at this point"); Edit Prompt (`e`) on it still moves to its parent and puts
-- its text in the chat input (PI_LSP_PROMPT_LEAF: such a session, leaf u2 under a1).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

vim.cmd("PiTree " .. vim.fn.fnameescape(os.getenv("PI_LSP_PROMPT_LEAF")))
local tree = H.wait_buf("pi://tree/", "← leaf", "the tree of the prompt-leaf session")
local uri = vim.b[tree].pi_lsp_uri
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, "u2"), 0 })
H.keys("b")
H.wait_said("already at this point", true, "b on the leaf prompt said nothing")
H.check(H.exec("pi.getTree", { uri = uri }).leafId == "u2", "b on the leaf prompt moved the leaf")

vim.api.nvim_win_set_cursor(0, { H.entry(tree, "u2"), 0 })
H.keys("e")
local input
H.wait(function()
  input = H.find_buf("pi://input/")
  return input ~= nil and H.contains(input, "still waiting")
end, "e did not put the leaf prompt in the chat input")
H.check(H.exec("pi.getTree", { uri = uri }).leafId == "a1", "e did not move to the prompt's parent")
H.finish()
