-- The session a command takes when none is named: the last used, unless its
-- file was deleted; then the workspace's newest.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local session = require("pi_lsp.session")

local example = H.exec("pi.listSessions").sessions[1].uri
local fork = H.exec("pi.fork", { uri = example }).uri
vim.cmd("PiTree " .. fork)
H.wait_buf("pi://tree/", "← leaf", "the fork's tree did not open")
H.check(session.last_uri == fork, "the fork is the session last used")

os.remove(vim.uri_to_fname(fork))
H.wait(function()
  return #H.exec("pi.listSessions").sessions == 1
end, "the deleted fork is still listed")
vim.cmd("only | enew")

-- Either answer ends the wait: an error names the deleted file.
local function reported(text)
  H.wait(function()
    return H.said(text) or vim.iter(H.messages):any(function(m)
      return m:find("no session at", 1, true) ~= nil
    end)
  end, "neither " .. text .. " nor an error")
  H.check(H.said(text), "expected " .. text .. ", got: " .. table.concat(H.messages, "\n"))
end

vim.cmd("PiCheck")
reported(vim.fs.basename(vim.uri_to_fname(example)) .. ": no problems")
H.check(session.last_uri == example, "the newest session is the last used now: " .. tostring(session.last_uri))
vim.cmd("PiChat")
H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat of the newest session did not open")

H.finish()
