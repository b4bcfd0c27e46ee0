-- Two rewind diffs (pi://files/<entry>) of a session are open when the session moves to a new
-- file mid-turn: they keep their names, and the chat follows the move to the turn's end.
-- Fake server: three turns writing notes.txt (v1, v2, v3), then a reply held after word3 (until
-- "cut").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local session = require("pi_lsp.session")
local chat_mod = require("pi_lsp.chat")
local rewind = require("pi_lsp.rewind")

vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local input_buf = H.find_buf("pi://input/")
local uri = session.last_uri
local chat = chat_mod.get(uri)
local function send(text)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
  vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { text })
  H.keys("<CR>")
end
for _, v in ipairs({ "v1", "v2", "v3" }) do
  send("write " .. v)
  H.wait(function()
    return H.contains(chat_buf, "wrote " .. v) and not chat.busy
  end, "the turn writing " .. v .. " did not end", chat_buf)
end

-- The diffs of restoring to after v1 and to after v2, each left open (Cancel).
local files_bufs = {}
for _, node in ipairs(H.exec("pi.getTree", { uri = uri }).nodes) do
  if node.preview == "wrote v1" or node.preview == "wrote v2" then
    table.insert(H.selects, function()
      return "Cancel"
    end)
    rewind.offer(uri, node.id, session.root_of(uri))
    local name = "pi://files/" .. node.id
    H.wait(function()
      return H.find_buf(name) ~= nil
    end, "the diff of " .. node.id .. " did not open")
    files_bufs[H.find_buf(name)] = name
  end
end
H.check(vim.tbl_count(files_bufs) == 2, "two diffs are open")

send("start")
H.wait(function()
  return H.contains(chat_buf, "word3")
end, "the turn did not stream", chat_buf)
local old_file = H.cut_last_line(uri)
H.release("cut")

H.wait(function()
  return chat.uri ~= uri
end, "the chat did not follow the session to its new file", chat_buf)
H.wait(function()
  return not chat.busy and H.contains(chat_buf, "word24")
end, "the moved turn did not end in the chat", chat_buf)
H.check(vim.api.nvim_buf_get_name(chat_buf) == "pi://chat/" .. vim.fn.fnamemodify(vim.uri_to_fname(chat.uri), ":t:r"),
  "the chat buffer is renamed")
for buf, name in pairs(files_bufs) do
  H.check(vim.api.nvim_buf_get_name(buf) == name, name .. " keeps its name")
  H.check(vim.b[buf].pi_lsp_uri == chat.uri, name .. " names the new file")
end
H.finish()
