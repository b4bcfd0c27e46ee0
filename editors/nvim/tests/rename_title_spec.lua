-- The open chat's title follows a name written after the session list was read: a :PiRename
-- queued behind the running turn (said so), and a session_info the pi CLI appends. No tree is
-- open, so pi/sessionChanged carries no tree change. Fake server: a reply held after word3
-- (until "renamed").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local session = require("pi_lsp.session")

local chat, _, uri = H.chat_streaming()
local file = vim.uri_to_fname(uri)
vim.cmd("PiRename Renamed while busy")
H.wait(function()
  return H.said(('%s will be named "Renamed while busy" when the running turn ends'):format(vim.fn.fnamemodify(file, ":t")))
end, "the rename was not said to wait for the turn", chat)
H.check(session.busy(uri), "the turn still runs")
H.release("renamed")
H.wait(function()
  return H.lines(chat)[1] == "# Renamed while busy"
end, "the chat's title did not follow the queued name", chat)

-- The pi CLI names the session.
local leaf = H.exec("pi.previewContext", { uri = uri, page = 1 }).leafId
local f = assert(io.open(file, "a"))
f:write(vim.json.encode({ type = "session_info", id = "cli0name", parentId = leaf,
  timestamp = "2026-12-05T20:00:00.000Z", name = "Named by the CLI" }) .. "\n")
f:close()
H.wait(function()
  return H.lines(chat)[1] == "# Named by the CLI"
end, "the chat's title did not follow the CLI's name", chat)
H.finish()
