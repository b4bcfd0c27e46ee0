-- Another program cuts the session file short while a turn streams: the server moves the
-- session to a new file (pi/sessionChanged's relocatedFrom, a session_moved turn event). The
-- chat, the tree and the context preview follow it there, the user is told, and the next
-- prompt goes to the new file. Fake server: a reply held after word3 (until "cut"), then
-- "Second reply".
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local session = require("pi_lsp.session")
local chat_mod = require("pi_lsp.chat")
local tree = require("pi_lsp.tree")

local chat_buf, input_buf, uri = H.chat_streaming()
local chat = chat_mod.get(uri)
local tree_buf = tree.open(uri)
H.wait(function()
  return tree.view(tree_buf).tree ~= nil
end, "the tree did not load", tree_buf)
require("pi_lsp.context").preview(uri)
local context_buf
H.wait(function()
  context_buf = H.find_buf("pi://context/")
  return context_buf ~= nil
end, "the context preview did not open")
H.check(chat.busy, "the turn still runs when the file is cut", chat_buf)

local old_file = H.cut_last_line(uri)
H.release("cut")

H.wait(function()
  return chat.uri ~= uri
end, "the chat did not follow the session to its new file", chat_buf)
local new_uri = chat.uri
local new_file = vim.uri_to_fname(new_uri)
H.check(new_file ~= old_file and vim.fn.filereadable(new_file) == 1, "the chat names the new file")
H.check(H.said("session moved to " .. vim.fn.fnamemodify(new_file, ":t")), "the user was told")
H.check(chat_mod.get(new_uri) == chat and chat_mod.get(uri) == nil, "the chat is kept by its new file")
H.check(session.last_uri == new_uri, "the last used session is the new file")
H.wait(function()
  return tree.view(tree_buf).uri == new_uri
end, "the tree did not follow", tree_buf)
local new_name = vim.fn.fnamemodify(new_file, ":t:r")
for buf, kind in pairs({ [chat_buf] = "chat", [input_buf] = "input", [tree_buf] = "tree", [context_buf] = "context" }) do
  H.check(vim.b[buf].pi_lsp_uri == new_uri, kind .. " buffer names the new file")
  H.check(vim.api.nvim_buf_get_name(buf) == "pi://" .. kind .. "/" .. new_name, kind .. " buffer renamed")
  H.check(H.find_buf("pi://" .. kind .. "/" .. vim.fn.fnamemodify(old_file, ":t:r")) == nil,
    "no buffer of the old name is left")
end

-- The rest of the turn (its events still name the old file) ends in the chat.
H.wait(function()
  return not chat.busy and H.contains(chat_buf, "word24")
end, "the moved turn did not end in the chat", chat_buf)
H.check(not session.busy(new_uri) and not session.busy(uri), "no session is left busy")

vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Second prompt" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "Second reply") and not chat.busy
end, "the second prompt was not answered in the chat", chat_buf)
local function holds(file, text)
  return table.concat(vim.fn.readfile(file, "b"), "\n"):find(text, 1, true) ~= nil
end
H.check(holds(new_file, "Second prompt") and not holds(old_file, "Second prompt"),
  "the second prompt went to the new file")
H.finish()
