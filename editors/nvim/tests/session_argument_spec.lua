-- A session named by a command's argument (its name or id, which :PiChat completes): a name a
-- repository chose that holds a backtick is text, never a shell command vim.fn.expand runs.
-- PI_LSP_NAMED: the name of a session in the workspace; PI_LSP_MARKER: the file the command in
-- the name would make.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local name, marker = os.getenv("PI_LSP_NAMED"), os.getenv("PI_LSP_MARKER")
H.check(vim.tbl_contains(require("pi_lsp.session").complete("notes"), name), "the name is completed")
vim.cmd("PiChat " .. name)
H.wait_buf("pi://chat/named", "the named session", "the named session's chat did not open")
H.check(vim.uv.fs_stat(marker) == nil, "the command in the session's name ran")
-- Not a name: taken for a path as it is (no command runs either).
vim.cmd("PiChat `touch " .. marker .. "`")
H.wait(function()
  return vim.tbl_contains(H.messages, ("pi-lsp: no session matches %q"):format("`touch " .. marker .. "`"))
end, "the unmatched argument was not reported")
H.check(vim.uv.fs_stat(marker) == nil, "the command in the argument ran")
H.finish()
