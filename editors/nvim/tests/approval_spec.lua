-- With toolApproval = "ask": the server's window/showMessageRequest shows up
-- in the chat, the user allows the call, the tool runs, the turn finishes.
-- Fake server: a bash call of PI_LSP_COMMAND (echo 'approved-run …' of Markdown's punctuation),
-- then a text reply.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

-- No argument, no session buffer, nothing used yet: the newest session.
vim.cmd("PiChat")
local chat_buf, input_buf
H.wait(function()
  chat_buf, input_buf = H.find_buf("pi://chat/"), H.find_buf("pi://input/")
  return chat_buf and H.contains(chat_buf, "# Fix slow order listing") and H.contains(chat_buf, "All green: 14 passed.")
end, "the chat of the example session did not render", chat_buf)
-- The compaction summary and thinking/tool details are folded.
local chat_win = vim.fn.bufwinid(chat_buf)
local summary = H.line_of(chat_buf, "Compacted history")
H.check(vim.api.nvim_win_call(chat_win, function()
  return vim.fn.foldclosed(summary)
end) == summary, "the compaction summary is folded", chat_buf)
local call = H.line_of(chat_buf, "**`→ bash(pytest -q)`**")
H.check(call and vim.api.nvim_win_call(chat_win, function()
  return vim.fn.foldclosed(call)
end) == call, "tool calls are folded", chat_buf)

local command = os.getenv("PI_LSP_COMMAND")
local asked, noted, shown
table.insert(H.selects, function(items, opts)
  asked = opts.prompt
  noted = H.contains(chat_buf, "wants to run bash: " .. command .. " (session: ")
  -- The command reads as written: its `*`, `_`, backticks and link are no markup.
  local line = H.line_of(chat_buf, "wants to run bash: ")
  shown = line and H.shown(chat_buf, line)
  H.dump(":PiChat (the server asks; vim.ui.select is open)", chat_buf, 10)
  for _, item in ipairs(items) do
    if item.title == "Allow" then
      return item
    end
  end
end)
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Run the echo" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "It printed approved-run.")
end, "the turn after the approved tool did not finish", chat_buf)
-- The server names the session after the command: "pi wants to run bash: … (session: NAME)".
H.check(asked and asked:find("wants to run bash: " .. command, 1, true), "the approval prompt: " .. tostring(asked))
H.check(noted, "the question was shown in the chat while it was asked", chat_buf)
H.check(vim.startswith(shown or "", "⚠ pi wants to run bash: " .. command .. " (session: "), "the command as written: " .. tostring(shown), chat_buf)
H.wait(function()
  return H.text(chat_buf):find("✓ bash: approved%-run") ~= nil
end, "the tool result is in the transcript", chat_buf)

H.wait(function()
  return H.text(chat_buf):find("## pi · `claude%-opus%-4%-5`  `%x+`\n\nIt printed approved%-run%.") ~= nil
end, "the transcript was not re-read after the turn", chat_buf)
H.dump(":PiChat (toolApproval = ask)", chat_buf, 18)

H.finish()
