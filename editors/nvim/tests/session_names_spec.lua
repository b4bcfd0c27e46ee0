-- A session file whose name holds `$NAME` (a repository chooses its sessions' names) is its own
-- session: the chat of `$PI_LSP_NAME.jsonl` is not the chat of `other.jsonl` when PI_LSP_NAME
-- is "other". PI_LSP_OTHER and PI_LSP_DOLLAR: the two files.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local chat = require("pi_lsp.chat")

local other = vim.uri_from_fname(os.getenv("PI_LSP_OTHER"))
local dollar = vim.uri_from_fname(os.getenv("PI_LSP_DOLLAR"))
chat.open(other)
H.wait_buf("pi://chat/other", "from the other session", "the other session's chat did not render")
vim.cmd("only")
local opened = chat.open(dollar)
H.check(opened.uri == dollar, "the chat opened is the other session's: " .. tostring(opened.uri))
H.wait_buf("pi://chat/$PI_LSP_NAME", "from the dollar session", "the dollar session's chat did not render")
H.finish()
