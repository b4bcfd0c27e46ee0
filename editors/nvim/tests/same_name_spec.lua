-- Two sessions whose files share a name (one in .pi/sessions, one in pi's own folder of the
-- workspace) get views of their own: their chats drew into one buffer and took one input, whose
-- keys sent to the session opened last. PI_LSP_A, PI_LSP_B: the two files.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chat = require("pi_lsp.chat")
local tree = require("pi_lsp.tree")

local a = vim.uri_from_fname(os.getenv("PI_LSP_A"))
local b = vim.uri_from_fname(os.getenv("PI_LSP_B"))
local chat_a = chat.open(a)
H.wait_buf("pi://chat/dup", "text of session A", "A's chat did not render")
vim.cmd("only")
local chat_b = chat.open(b)
H.wait_buf("pi://chat/dup (2)", "text of session B", "B's chat did not render")
H.check(chat_a.buf ~= chat_b.buf and chat_a.input ~= chat_b.input, "the two chats share buffers")
H.check(H.contains(chat_a.buf, "text of session A") and not H.contains(chat_a.buf, "text of session B"),
  "A's chat shows B's text", chat_a.buf)
H.check(vim.b[chat_b.input].pi_lsp_uri == b, "B's input is not B's: " .. tostring(vim.b[chat_b.input].pi_lsp_uri))

vim.cmd("only")
tree.open(a)
local tree_a = H.wait_buf("pi://tree/dup", "text of session A", "A's tree did not draw")
vim.cmd("only")
tree.open(b)
local tree_b = H.wait_buf("pi://tree/dup (2)", "text of session B", "B's tree did not draw")
H.check(tree_a ~= tree_b and tree.view(tree_a).uri == a, "the two trees share a buffer")
H.finish()
