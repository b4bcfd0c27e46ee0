-- A hand-edited tool result's toolName of another type (PI_LSP_ODD_NAMES: a session of such
-- results; PI_LSP_NAMES: JSON, the line each must draw, as JavaScript's String() writes its
-- name): the chat shows the name as the other views (and pi) do.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

vim.cmd("PiChat " .. vim.fn.fnameescape(os.getenv("PI_LSP_ODD_NAMES")))
local chat_buf = H.wait_buf("pi://chat/names", "All done", "the chat of odd tool names did not render")
for _, line in ipairs(vim.json.decode(os.getenv("PI_LSP_NAMES"))) do
  H.check(vim.tbl_contains(H.lines(chat_buf), line), "a line of its own: " .. line, chat_buf)
end
H.finish()
