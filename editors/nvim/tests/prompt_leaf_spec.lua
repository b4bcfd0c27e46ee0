-- Branch Here (`b`) on a prompt that is the leaf (no reply yet) stays there, as pi 1.6's /tree
-- does ("Already at this point"); Edit Prompt (`e`) on it still moves to its parent and puts
-- its text in the chat input (PI_LSP_PROMPT_LEAF: such a session, leaf u2 under a1). `e` sends
-- `edit` only there, so an older server (which refuses fields it does not know) edits the others.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local client = require("pi_lsp.client")
local exec, branches, older = client.exec, {}, false
client.exec = function(command, args, callback, root) -- the edits asked for; `older`: refused
  if command == "pi.branch" then
    table.insert(branches, args.edit == nil and "plain" or "edit")
    if older and args.edit ~= nil then
      return callback({ message = "Object contains unknown field `edit` - at `$[0]`" }, nil)
    end
  end
  return exec(command, args, callback, root)
end

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
H.check(vim.deep_equal(branches, { "plain", "edit" }),
  "e on the leaf prompt: asked plainly, then with edit; asked " .. vim.inspect(branches))

-- An older server, which refuses `edit`: e on a prompt that is not the leaf (a1 is) still works.
older, branches = true, {}
vim.api.nvim_buf_set_lines(input, 0, -1, false, {}) -- (sent, say: no draft to ask about)
vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
vim.api.nvim_win_set_cursor(0, { H.entry(tree, "u1"), 0 })
H.keys("e")
H.wait(function()
  input = H.find_buf("pi://input/")
  return input ~= nil and H.contains(input, "first")
end, "e against an older server did not put the prompt in the chat input")
H.check(vim.deep_equal(branches, { "plain" }), "e asked with edit off the leaf: " .. vim.inspect(branches))
for _, message in ipairs(H.messages) do
  H.check(not message:find("unknown field", 1, true), "e against an older server failed: " .. message)
end
H.finish()
