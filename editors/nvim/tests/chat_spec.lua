-- :PiSessions starts a new session, :PiChat sends a prompt and shows the
-- streamed reply, then a slow reply is aborted and the turn ends; then a prompt
-- that fails before its turn, a chat reopened mid-turn and a server crash.
-- The fake server is scripted with: text_reply("Hello", " there"), then two
-- replies of 60 pieces held after piece1 (until "aborted", "crashed"), then
-- text_reply("Back", " again"), a bash call that waits for H.release("tool") and
-- text_reply("Fifth", " reply").
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()
local pi = require("pi_lsp")

-- :PiSessions: the first item starts a new session; it opens in the chat.
table.insert(H.selects, function(items)
  assert(items[1].new, "the first item starts a new session")
  return items[1]
end)
table.insert(H.inputs, "nvim chat")
-- Opening the chat has the server get its first turn ready (pi.prepareTurn), so the first
-- reply does not wait for the model's SDK to load.
local client = require("pi_lsp.client")
local exec, prepared = client.exec, {}
client.exec = function(command, args, callback, root)
  if command == "pi.prepareTurn" then
    table.insert(prepared, args.uri)
    local given = callback
    callback = function(err, result)
      prepared.answer = err or result
      given(err, result)
    end
  end
  return exec(command, args, callback, root)
end
vim.cmd("PiSessions")
local chat_buf, input_buf
H.wait(function()
  chat_buf, input_buf = H.find_buf("pi://chat/"), H.find_buf("pi://input/")
  return chat_buf and input_buf and vim.api.nvim_get_current_buf() == input_buf
end, "the chat did not open with its input")
local uri = vim.b[chat_buf].pi_lsp_uri
H.wait(function()
  return prepared.answer ~= nil
end, "pi.prepareTurn was not answered")
client.exec = exec
H.check(#prepared == 1 and prepared[1] == uri, "asked once, for the chat's session: " .. vim.inspect(prepared))
H.check(prepared.answer.provider == "anthropic" and prepared.answer.model == "claude-sonnet-4-5", "the model its turn would use: " .. vim.inspect(prepared.answer))
H.wait(function()
  return H.contains(chat_buf, "# nvim chat")
end, "the chat header names the session", chat_buf)

-- `S` with nothing running steers nothing: the draft stays, no prompt is sent
-- (the fake server's request count is checked by tests/test_nvim.py).
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "a draft, not a prompt" })
H.keys("S")
H.check(vim.tbl_contains(H.messages, "pi-lsp: nothing to steer: pi is not running (<CR> sends the input as a prompt)"), "S when idle says so: " .. table.concat(H.messages, " | "))
H.check(H.text(input_buf) == "a draft, not a prompt", "the draft is kept", input_buf)
H.exec("pi.listModels") -- a round trip: a prompt sent before it would have been answered
H.check(not H.contains(chat_buf, "a draft"), "the draft was not sent", chat_buf)

-- Send a prompt from the input with <CR>; the reply streams into the chat.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Say hello" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "Hello there")
end, "the streamed reply did not reach the chat", chat_buf)
H.wait(function()
  return not pi.statusline():find("busy", 1, true) and H.text(chat_buf):find("## pi · `claude%-sonnet%-4%-5`  `%x+`")
end, "the turn did not end with the transcript re-read (entry ids)", chat_buf)
local text = H.text(chat_buf)
local you, reply = text:find("## You", 1, true), text:find("Hello there", 1, true)
H.check(you and you < reply and text:find("Say hello", 1, true), "prompt then reply", chat_buf)
H.check(#H.lines(input_buf) == 1 and H.lines(input_buf)[1] == "", "the input was cleared", input_buf)
local nodes = H.exec("pi.getTree", { uri = uri }).nodes
H.check(nodes[#nodes].role == "assistant" and nodes[#nodes].preview == "Hello there", "the reply is in the session")
H.dump(":PiChat (after a streamed reply)", chat_buf)

-- A slow reply: wait until it streams, abort with <C-c>, see the turn end.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Count slowly" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "piece1")
end, "the slow reply did not start streaming", chat_buf)
H.check(H.contains(chat_buf, "pi is working"), "a busy line while the turn runs", chat_buf)
H.check(pi.statusline():find("busy", 1, true), "the statusline says busy: " .. pi.statusline())
-- Steer while it runs: the server queues it, the chat notes it.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Faster, please" })
H.keys("S")
H.wait(function()
  return H.contains(chat_buf, "↳ steering: Faster, please")
end, "the steering message was not queued", chat_buf)
H.dump(":PiChat (streaming)", chat_buf)
H.keys("<C-c>")
H.wait(function()
  return H.contains(chat_buf, "_`(aborted") and not H.contains(chat_buf, "pi is working")
end, "the aborted turn did not end", chat_buf)
-- The reply is held after piece1 until now: cut before its end, not run out.
H.check(not H.contains(chat_buf, "piece30"), "the reply stopped streaming", chat_buf)
H.release("aborted")
H.wait(function()
  return not pi.statusline():find("busy", 1, true)
end, "the statusline still says busy: " .. pi.statusline())

H.wait(function()
  return H.text(chat_buf):find("## You  `%x+`\n\nCount slowly") ~= nil and not H.contains(chat_buf, "↳ steering")
end, "the transcript was not re-read after the abort", chat_buf)
H.dump(":PiChat (after <C-c>)", chat_buf, 12)
-- The steer never reached pi (the turn was aborted first): its text is back.
H.wait(function()
  return H.text(input_buf) == "Faster, please"
end, "the undelivered steer is back in the input", input_buf)
H.check(vim.tbl_contains(H.messages, "pi-lsp: the turn ended before your queued message reached pi; it is back in the input"), "and a message says so")

-- The tree of the new session (T from the chat) shows the turns (given the
-- room: a narrow tree shortens previews).
vim.api.nvim_set_current_win(vim.fn.bufwinid(chat_buf))
vim.cmd("only")
H.keys("T")
local tree_buf
H.wait(function()
  tree_buf = H.find_buf("pi://tree/")
  return tree_buf and H.contains(tree_buf, "Count slowly") and H.contains(tree_buf, "← leaf")
end, "the tree of the new session", tree_buf)
H.dump(":PiTree (new session)", tree_buf)

-- A prompt that fails before its turn starts (its model's provider has no API key) was
-- never written to the session: it goes back into the input instead of being lost.
vim.cmd("PiChat " .. uri)
H.wait(function()
  return vim.api.nvim_get_current_buf() == input_buf
end, "the chat input is shown again")
H.exec("pi.setModel", { uri = uri, provider = "openai", modelId = "gpt-4.1" })
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "a prompt pi never got" })
H.keys("<CR>")
H.wait(function()
  return vim.tbl_contains(H.messages, "pi-lsp: your prompt did not reach pi; it is back in the input")
end, "the failed prompt was not given back: " .. table.concat(H.messages, " | "))
H.check(H.text(input_buf) == "a prompt pi never got", "the failed prompt is back in the input", input_buf)
H.check(H.contains(chat_buf, "**`⚠ "), "the error is shown", chat_buf)
H.check(not require("pi_lsp.chat").get(uri).busy, "the chat is not busy")
H.exec("pi.setModel", { uri = uri, provider = "anthropic", modelId = "claude-sonnet-4-5" })

-- Only the input wiped (:bwipeout), then :PiChat: the chat makes its input again, with its
-- session and its keys (the next prompt is sent from it with <CR>).
vim.cmd("bwipeout! " .. input_buf)
vim.cmd("PiChat " .. uri)
H.wait(function()
  input_buf = H.find_buf("pi://input/")
  return input_buf and vim.api.nvim_get_current_buf() == input_buf
end, "the wiped input was not made again")
H.check(vim.b[input_buf].pi_lsp_uri == uri and vim.b[input_buf].pi_lsp_root == vim.b[chat_buf].pi_lsp_root,
  "the new input names its session")

-- A chat reopened mid-turn shows the conversation before the running turn at once.
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Count again" })
H.keys("<CR>")
H.wait(function()
  return H.contains(chat_buf, "again1")
end, "the third reply did not start streaming", chat_buf)
vim.cmd("bwipeout! " .. chat_buf .. " " .. input_buf)
vim.cmd("PiChat " .. uri)
H.wait(function()
  chat_buf, input_buf = H.find_buf("pi://chat/"), H.find_buf("pi://input/")
  return chat_buf and input_buf and H.contains(chat_buf, "Say hello") and H.contains(chat_buf, "Hello there")
    and H.contains(chat_buf, "pi is working")
end, "the reopened chat did not show the earlier conversation while the turn runs", chat_buf)

-- The server dies mid-turn: the chat stops waiting for a turn that is gone, drops the
-- half-streamed reply, gives back the undelivered steer and takes prompts again.
vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Steer before the crash" })
H.keys("S")
H.wait(function()
  return H.contains(chat_buf, "↳ steering: Steer before the crash")
end, "the steer was not queued", chat_buf)
for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
  vim.uv.kill(pid, "sigkill")
end
local crashed = require("pi_lsp.chat").get(uri)
H.wait(function()
  return not crashed.busy and not H.contains(chat_buf, "pi is working") and not pi.statusline():find("busy", 1, true)
end, "the chat stayed busy after the server died: " .. pi.statusline(), chat_buf)
H.check(H.contains(chat_buf, "the pi-lsp server stopped"), "a note says the server stopped", chat_buf)
H.check(not H.contains(chat_buf, "again1"), "the half-streamed reply is gone", chat_buf)
H.release("crashed")
H.wait(function()
  return H.text(input_buf) == "Steer before the crash"
end, "the undelivered steer is back in the input", input_buf)
H.check(not H.contains(chat_buf, "↳ steering"), "the note of the steer given back is gone", chat_buf)
H.keys("<CR>") -- sent as a prompt: a new server runs it
H.wait(function()
  return H.contains(chat_buf, "Back again") and not crashed.busy
    and H.text(chat_buf):find("## You  `%x+`\n\nSay hello") ~= nil
end, "the chat did not take a prompt after the crash", chat_buf)
H.check(not vim.tbl_contains(H.messages, "pi-lsp: nothing is running"), "nothing refused")

-- A transcript read while idle but answered after the next turn started is from before
-- its prompt: it is dropped, not drawn over the prompt (the turn's end reads again).
local held = {}
client.exec = function(command, args, callback, root)
  if command == "pi.previewContext" and args.page ~= 1 and not held.sent then -- (page 1: the statusline's)
    held.sent = true
    return exec(command, args, function(err, result)
      held.answer = function()
        callback(err, result)
      end
    end, root)
  end
  return exec(command, args, callback, root)
end
crashed.resync()
H.wait(function()
  return held.answer ~= nil
end, "the held read was not answered")
client.exec = exec
local kept
local off = require("pi_lsp.util").on("turn", function(params)
  local event = params.event or {}
  if event.type == "tool_execution_start" and kept == nil then
    vim.schedule(function() -- after the chat has drawn the prompt, with no reply streaming
      held.answer()
      kept = H.contains(chat_buf, "Last one")
      H.release("tool") -- (checked while the tool runs: the turn's end reads again)
    end)
  end
end)
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Last one" })
H.keys("<CR>")
H.wait(function()
  return kept ~= nil
end, "the prompt did not reach the chat")
off()
H.check(kept, "a read from before the prompt replaced it", chat_buf)
H.wait(function()
  return H.contains(chat_buf, "Fifth reply") and not crashed.busy
end, "the last turn did not end", chat_buf)

-- A failed automatic compaction: the server words it as pi does, the chat shows it as it is
-- (it read "compaction failed: Auto-compaction failed: …").
require("pi_lsp.util").emit("turn", { uri = uri, event = {
  type = "compaction_end", error = "Auto-compaction failed: the summary model is down" } })
H.check(H.contains(chat_buf, "_`✗ Auto-compaction failed: the summary model is down`_"),
  "the server's words are shown as they are", chat_buf)

-- One the user stopped is a status, as pi 1.6 shows it (the server sent it as an error).
require("pi_lsp.util").emit("turn", { uri = uri, event = {
  type = "compaction_end", aborted = true } })
H.check(H.contains(chat_buf, "_Auto-compaction cancelled_")
  and not H.contains(chat_buf, "✗ Auto-compaction cancelled"),
  "a stopped compaction is a status", chat_buf)

-- A long conversation is read in pages (pi.previewContext's `page`): the chat
-- shows the first and the last, a line for the messages left out, and a
-- message a context edit removed where it stood.
local function said(text)
  return { role = "user", content = text, timestamp = 1 }
end
local long = require("pi_lsp.render").builder()
long:context({
  totalMessages = 120,
  pages = { { start = 0, messages = { { entryId = "00000001", message = said("first of all") } } },
            { start = 119, messages = { { entryId = "00000077", message = said("the last one") } } } },
  edits = {
    { kind = "omitted", position = 119, role = "toolResult", targetId = "00000076", tokensBefore = 9, original = "out" },
    { kind = "omitted", position = 50, role = "toolResult", targetId = "00000033", tokensBefore = 9, original = "unseen" },
  },
})
local shown = table.concat(long.lines, "\n")
local first, gap = shown:find("first of all", 1, true), shown:find("_… messages 2 to 119 not shown_", 1, true)
local removed, last = shown:find("~~toolResult~~ removed from the context · 9 tokens  `00000076`", 1, true), shown:find("the last one", 1, true)
H.check(first and gap and removed and last and first < gap and gap < removed and removed < last, "the pages in order with the run left out between them:\n" .. shown)
H.check(not shown:find("00000033", 1, true), "an edit among the messages left out is not shown:\n" .. shown)

-- A tool result's hand-edited isError marks it failed as pi (JavaScript) reads it: 0, "" and
-- null are false there (Lua takes 0 and "" for true), {} and [] true.
for _, case in ipairs({ { true, "✗" }, { {}, "✗" }, { "no", "✗" }, { 1, "✗" }, { 0, "✓" },
  { "", "✓" }, { false, "✓" }, { vim.NIL, "✓" }, { nil, "✓" } }) do
  local result = require("pi_lsp.render").builder()
  result:message({ role = "toolResult", toolCallId = "t1", toolName = "read", isError = case[1],
    content = { { type = "text", text = "o" } }, timestamp = 3 })
  local text = table.concat(result.lines, "\n")
  H.check(text:find("▸ `" .. case[2] .. " read: o`", 1, true), "isError " .. vim.inspect(case[1])
    .. " is shown as " .. case[2] .. ":\n" .. text)
end

H.finish()
