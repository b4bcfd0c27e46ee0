-- :PiChat — the conversation on the current path as Markdown, with an input
-- window under it. The transcript is what pi.previewContext says (agent layer,
-- the first and last pages of a long one);
-- while a turn runs, pi/turn events stream the reply into a "live" region at
-- the end, and when the run ends the transcript is read again from the server.
local client = require("pi_lsp.client")
local config = require("pi_lsp.config")
local render = require("pi_lsp.render")
local session = require("pi_lsp.session")
local sessionfile = require("pi_lsp.sessionfile")
local util = require("pi_lsp.util")

local M = {}

local chats = {} -- session key -> chat
-- session key -> the wait its turn is in before asking again for a failed reply
-- ({ attempt, max, deadline, root }): a chat opened during it shows it.
local waits = {}
-- session key -> texts of steers and follow-ups sent whose pi.prompt has not answered: the
-- session's, not a chat's, as a chat wiped and opened again still awaits them.
local unanswered = {}
local HEADER_LINES = 2
local PAGE = 50 -- messages from each end of a long conversation (:PiContext pages through all)
-- Characters of the transcript shown, newest messages first: treesitter parses the whole buffer
-- at once, about 1 ms a KB (5 MB froze Neovim for 6.5 s); `+` doubles it.
local BUDGET = 200000

local function name_of(uri)
  return vim.fn.fnamemodify(util.key(uri), ":t:r")
end

local function title_of(chat)
  for _, s in ipairs(session.listed[chat.root] or {}) do
    if util.same(s.uri, chat.uri) then
      return s.title
    end
  end
  return name_of(chat.uri)
end

local make_input -- (below, with the keys it maps)

--- The input buffer of `chat`, made again if it was wiped (:bwipeout of it alone).
local function input_of(chat)
  if not vim.api.nvim_buf_is_valid(chat.input) then
    make_input(chat)
  end
  return chat.input
end

local function input_text(chat)
  local lines = vim.api.nvim_buf_get_lines(input_of(chat), 0, -1, false)
  return vim.trim(table.concat(lines, "\n"))
end

-- -- drawing ------------------------------------------------------------------------------------
-- The buffer is: a header, the committed transcript, then the live region
-- (the reply being streamed, notes such as approval prompts, a busy line).
-- Streaming rewrites only the live region.

--- The wait before a failed reply is asked for again, counted down as pi 1.6 counts it.
local function retry_line(retry)
  local seconds = math.max(0, math.ceil((retry.deadline - vim.uv.now()) / 1000))
  return ("_↻ retrying (%d/%d) in %d s… (%s abort)_"):format(retry.attempt, retry.max, seconds, config.options.chat.keys.abort)
end

local function live_builder(chat)
  local b = render.builder()
  if #chat.committed.lines > 0 then
    b:add("") -- keeps the live region apart from the last committed message
  end
  if chat.live then
    b:message(chat.live)
  end
  for _, note in ipairs(chat.notes) do
    b:blank()
    b:add(note.text)
  end
  for _, item in ipairs(chat.context) do
    b:blank()
    b:add("_📎 " .. render.literal(item.label, "") .. " goes with the next message_")
  end
  if chat.retry then
    b:blank()
    b:add(retry_line(chat.retry))
  elseif chat.busy then
    local keys = config.options.chat.keys
    local doing = chat.tool and ("running " .. util.one_line(chat.tool)) or "working" -- the model's name
    b:blank()
    b:add(("_⏳ pi is %s… (%s abort · %s steer · %s follow-up)_"):format(doing, keys.abort, keys.steer, keys.follow_up))
  end
  return b
end

--- Follow the end of the transcript in windows the user is not typing in.
local function follow(chat)
  local count = vim.api.nvim_buf_line_count(chat.buf)
  for _, win in ipairs(vim.fn.win_findbuf(chat.buf)) do
    if win ~= vim.api.nvim_get_current_win() then
      vim.api.nvim_win_set_cursor(win, { count, 0 })
    end
  end
end

--- Rewrite the buffer from 0-based line `from` (default: the live region)
--- to the end. Fold levels are set first: nvim reads them as lines change.
local function redraw(chat, from)
  if not vim.api.nvim_buf_is_valid(chat.buf) then
    return
  end
  local header = { "# " .. title_of(chat), "" }
  local committed = chat.committed
  local live = live_builder(chat)
  local folds = {}
  for _, fold in ipairs(committed.folds) do
    folds[#folds + 1] = { fold[1] + HEADER_LINES, fold[2] + HEADER_LINES }
  end
  local live_start = HEADER_LINES + #committed.lines
  for _, fold in ipairs(live.folds) do
    folds[#folds + 1] = { fold[1] + live_start, fold[2] + live_start }
  end
  util.set_folds(chat.buf, folds)
  from = from or live_start
  if from > vim.api.nvim_buf_line_count(chat.buf) then
    from = 0 -- an event before the first draw: the buffer is still empty
  end
  local lines = {}
  for i = from + 1, live_start + #live.lines do
    if i <= HEADER_LINES then
      lines[#lines + 1] = header[i]
    elseif i <= live_start then
      lines[#lines + 1] = committed.lines[i - HEADER_LINES]
    else
      lines[#lines + 1] = live.lines[i - live_start]
    end
  end
  util.set_lines(chat.buf, from, -1, lines)
  follow(chat)
end

local function draw_live(chat)
  redraw(chat)
end

local function draw_all(chat)
  redraw(chat, 0)
end

--- Draw the transcript last read from the server, within the chat's budget.
local function draw_transcript(chat)
  local b = render.builder()
  b:context(chat.result, chat.budget, config.options.chat.keys.more)
  chat.committed = b
  draw_all(chat)
end

--- The entry of the message that buffer line `row` is in (nil above the first).
local function entry_on(chat, row)
  local found
  for _, entry in ipairs(chat.committed.entries) do
    if entry.line + HEADER_LINES <= row then
      found = entry
    end
  end
  return found
end

--- Where buffer line `row` is, in terms that outlast drawing the transcript with a larger budget:
--- older messages come above, and a message that was cut grows below its shown lines.
local function anchor_of(chat, row)
  if row > HEADER_LINES + #chat.committed.lines then
    -- The live region (an error note): unchanged, under the transcript.
    return { from_end = vim.api.nvim_buf_line_count(chat.buf) - row }
  end
  local within = entry_on(chat, row)
  -- Above the first message (the header, the line for older messages) nothing moves.
  return { row = row, id = within and within.id, offset = within and (row - HEADER_LINES - within.line) }
end

--- The buffer line `anchor` (from anchor_of) is at now.
local function row_of(chat, anchor)
  if anchor.from_end then
    return vim.api.nvim_buf_line_count(chat.buf) - anchor.from_end
  end
  for _, entry in ipairs(chat.committed.entries) do
    if entry.id == anchor.id then
      return HEADER_LINES + entry.line + anchor.offset
    end
  end
  return anchor.row
end

--- Show twice as much of the transcript, the cursor staying on the text it was on.
local function show_more(chat)
  if not chat.result then
    return
  end
  chat.budget = chat.budget * 2
  if chat.busy then
    -- Redrawn from the last read, the transcript would lose the messages this turn committed.
    return util.notify("more of the transcript shows when the turn ends")
  end
  local anchors = {}
  for _, win in ipairs(vim.fn.win_findbuf(chat.buf)) do
    anchors[win] = anchor_of(chat, vim.api.nvim_win_get_cursor(win)[1])
  end
  draw_transcript(chat)
  local count = vim.api.nvim_buf_line_count(chat.buf)
  for win, anchor in pairs(anchors) do
    vim.api.nvim_win_set_cursor(win, { math.min(math.max(1, row_of(chat, anchor)), count), 0 })
  end
end

--- Read the transcript again from the server (coalesced per chat).
local function resync(chat)
  chat.resync()
end

local function make_resync(chat)
  return util.coalesce(function(done)
    local turns = chat.turns
    client.exec("pi.previewContext", { uri = chat.uri, page = PAGE }, function(err, result)
      if err then
        util.error("pi.previewContext: " .. (err.message or tostring(err)))
      elseif chat.turns == turns then
        -- (A turn that started since was read from before its prompt: its
        -- agent_end reads again.) The live region is drawn apart from this.
        chat.result = result
        chat.leaf = result.leafId
        draw_transcript(chat)
      end
      done()
    end, chat.root)
  end)
end

-- -- turn events --------------------------------------------------------------------------------

--- Add what `draw` adds to a builder to the committed transcript, and show it.
local function commit_drawn(chat, draw)
  local before = #chat.committed.lines
  local b = render.builder()
  draw(b)
  chat.committed:extend(b)
  redraw(chat, HEADER_LINES + before)
end

local function commit(chat, message)
  commit_drawn(chat, function(b)
    b:message(message)
  end)
end

-- The events between a failed reply's message_end and the auto_retry_start that asks for it
-- again, if one does: until the next other event the reply stays as it streamed (chat.failed).
local BEFORE_RETRY = { turn_end = true, save_point = true }

--- The failed reply held back is drawn once it is known what it is: left out of the context
--- when pi asks for it again (auto_retry_start), as the transcript after the turn shows it;
--- else the turn's failure. Drawn once, as pi 1.6 draws it, not as the one and then the other.
local function settle_failed(chat, retried)
  local failed = chat.failed
  chat.failed = nil
  if not failed then
    return
  end
  chat.live = nil
  commit_drawn(chat, function(b)
    if retried then
      b:removed(render.attempt_mark(failed))
    else
      b:message(failed)
    end
  end)
end

local function stop_retry(chat)
  local retry = chat.retry
  chat.retry = nil
  if retry then
    retry.timer:stop()
    retry.timer:close()
  end
end

local function add_note(chat, item)
  table.insert(chat.notes, item)
  draw_live(chat)
  return item
end

--- A line under the transcript about the running turn. Only `lasting` notes
--- (errors) outlive the turn: the rest (approvals) are shown by the transcript
--- itself once the turn has ended, or no longer matter.
local function note(chat, text, lasting)
  local last = chat.notes[#chat.notes]
  if last and last.text == text then
    return last -- the harness and the server may both report one failure
  end
  return add_note(chat, { text = text, lasting = lasting })
end

--- Take the notes of queued `messages` away: each was delivered (the transcript shows it
--- now) or given back to the input.
local function drop_notes(chat, messages)
  local gone = {}
  for _, message in ipairs(messages) do
    gone[message.note] = true
  end
  chat.notes = vim.tbl_filter(function(item)
    return not gone[item]
  end, chat.notes)
end

--- Where in `queued` the delivered message of `text` is: pi delivers every queued steer
--- before any follow-up, so a text both a steer and a follow-up have is the steer's.
local function delivered_index(queued, text)
  for _, delivery in ipairs({ "steer", "followUp" }) do
    for i, item in ipairs(queued) do
      if item.delivery == delivery and item.text == text then
        return i
      end
    end
  end
end

local on_event = {}

function on_event.agent_start(chat)
  chat.busy, chat.notes, chat.pending = true, {}, nil
  chat.turns = chat.turns + 1
  -- Its queue_dropped names what was withdrawn before it began (its prompt was being asked
  -- about): given back then, it is not given back again. What earlier turns gave back goes.
  chat.given_back = vim.tbl_map(function(given)
    return { text = given.text, early = false }
  end, vim.tbl_filter(function(given)
    return given.early
  end, chat.given_back))
end

function on_event.message_start(chat, event)
  if event.message and event.message.role == "assistant" then
    chat.live = render.live(event.message)
  end
end

function on_event.message_update(chat, event)
  chat.live = chat.live or render.live(nil)
  render.apply_deltas(chat.live, event.deltas)
end

function on_event.message_end(chat, event)
  local message = event.message
  if not message then
    return
  end
  if message.role == "assistant" and message.stopReason == "error" then
    chat.failed = message -- pi may ask for it again: drawn once that is known (settle_failed)
    return
  end
  if message.role == "assistant" then
    chat.live = nil
  end
  if message.role == "user" then
    -- A queued steer or follow-up reached the model: it is no longer ours to keep.
    local i = delivered_index(chat.queued, sessionfile.sent_text(message.content))
    if i then
      drop_notes(chat, { table.remove(chat.queued, i) })
    end
  end
  commit(chat, message)
end

function on_event.turn_start(chat)
  stop_retry(chat) -- the wait is over: the reply is being asked for again
end

--- Count `wait` (from `waits`) down where the busy line is.
local function start_retry(chat, wait)
  stop_retry(chat)
  local timer = assert(vim.uv.new_timer())
  local retry = { attempt = wait.attempt, max = wait.max, deadline = wait.deadline, timer = timer }
  chat.retry = retry
  timer:start(1000, 1000, vim.schedule_wrap(function()
    if chat.retry ~= retry then
      return
    elseif not vim.api.nvim_buf_is_valid(chat.buf) then
      stop_retry(chat) -- the chat is gone: no event of its turn reaches it
    else
      draw_live(chat) -- the seconds left
    end
  end))
end

function on_event.auto_retry_start(chat)
  start_retry(chat, waits[util.key(chat.uri)])
end

function on_event.auto_retry_end(chat, event)
  stop_retry(chat)
  if not event.success then
    local attempts = ("%d attempt%s"):format(event.attempt or 0, event.attempt == 1 and "" or "s")
    local why = ("⚠ Retry failed after %s: %s"):format(attempts, util.one_line(event.finalError or "Unknown error"))
    note(chat, render.literal(why, "**"), true)
  end
end

function on_event.tool_execution_start(chat, event)
  chat.tool = event.toolName
end

function on_event.tool_execution_end(chat)
  chat.tool = nil
end

function on_event.compaction_start(chat, event)
  note(chat, ("_⋯ compacting the context (%s)_"):format(event.reason or ""))
end

--- What a compaction_end says in the chat: stopped by the user is a status, as pi 1.6's
--- "Auto-compaction cancelled" line; the server words a failure as pi does, shown as it is.
local function compaction_end_note(event)
  if event.aborted then
    return "_Auto-compaction cancelled_"
  end
  return event.error and render.literal("✗ " .. event.error, "_") or "_✓ context compacted_"
end

function on_event.compaction_end(chat, event)
  note(chat, compaction_end_note(event))
end

--- Put undelivered messages ({ text, context }) back: their texts into the input, before
--- whatever is being written there now, and their code to go with the next message.
local function put_back(chat, messages)
  if #messages == 0 then
    return false
  end
  local texts, context = {}, {}
  for _, message in ipairs(messages) do
    texts[#texts + 1] = message.text
    vim.list_extend(context, message.context)
  end
  local draft = input_text(chat)
  if draft ~= "" then
    texts[#texts + 1] = draft
  end
  vim.api.nvim_buf_set_lines(input_of(chat), 0, -1, false, util.split_lines(table.concat(texts, "\n\n")))
  chat.context = vim.list_extend(context, chat.context)
  return true
end

--- `queued` in the order pi 1.6 gives queued messages back (restoreQueuedMessagesToEditor):
--- every steer, then every follow-up, each in the order sent.
local function steers_first(queued)
  local ordered = {}
  for _, delivery in ipairs({ "steer", "followUp" }) do
    vim.list_extend(ordered, vim.tbl_filter(function(item)
      return item.delivery == delivery
    end, queued))
  end
  return ordered
end

--- Steers and follow-ups the turn ended without (an abort, an error) go back
--- into the input.
local function restore_queued(chat)
  local queued = chat.queued
  chat.queued = {}
  drop_notes(chat, queued)
  for _, item in ipairs(queued) do
    table.insert(chat.given_back, { text = item.text, early = false })
  end
  if put_back(chat, steers_first(queued)) then
    util.warn("the turn ended before your queued message reached pi; it is back in the input")
  end
end

--- A prompt whose turn was not seen to start (no API key, the server gone) goes back
--- into the input it was cleared from: unless the session file holds it (the server wrote
--- it, and stopped before its agent_start reached the chat).
local function restore_pending(chat)
  local pending = chat.pending
  chat.pending = nil
  if pending and not sessionfile.prompt_written_since(pending.file, pending.since, pending.text, pending.id)
      and put_back(chat, { pending }) then
    util.warn("your prompt did not reach pi; it is back in the input")
  end
end

--- The turn is over, however it ended: nothing runs, and what it did not deliver
--- (a prompt, queued steering) goes back to the input.
local function end_turn(chat)
  settle_failed(chat) -- (the server stopped before saying whether it asks for it again)
  chat.busy, chat.live, chat.tool = false, nil, nil
  stop_retry(chat)
  restore_pending(chat)
  restore_queued(chat)
end

--- Remove the first `text` from the list `texts`; whether it was there.
local function take_text(texts, text)
  for i, item in ipairs(texts) do
    if item == text then
      table.remove(texts, i)
      return true
    end
  end
  return false
end

--- What an abort left unsent that this chat did not give back itself (it was opened again after
--- they were queued, its queue lost with the chat wiped) goes back into the input, text alone.
function on_event.queue_dropped(chat, event)
  local mine = vim.tbl_map(function(given)
    return given.text
  end, chat.given_back)
  -- A `dropped` answer to come gives those back (to this chat, if another sent them: it was wiped).
  vim.list_extend(mine, unanswered[util.key(chat.uri) or ""] or {})
  chat.given_back = {}
  local back = {}
  for _, text in ipairs(vim.list_extend(vim.list_slice(event.steering or {}), event.followUp or {})) do
    if not take_text(mine, text) then
      back[#back + 1] = { text = text, context = {} }
    end
  end
  if put_back(chat, back) then
    util.warn("the turn ended before your queued message reached pi; it is back in the input")
  end
end

function on_event.error(chat, event)
  end_turn(chat)
  note(chat, render.literal("⚠ " .. (event.message or "error"), "**"), true)
  resync(chat)
end

function on_event.agent_end(chat)
  chat.pending = nil -- delivered: the turn ran
  end_turn(chat)
  chat.notes = vim.tbl_filter(function(item)
    return item.lasting
  end, chat.notes)
  resync(chat) -- the server's transcript carries the entry ids
end

-- The events that end a turn's wait (or start a run that is in none).
local WAIT_OVER = { agent_start = true, turn_start = true, auto_retry_end = true, agent_end = true, error = true }

--- Keep the wait an auto_retry_start of the session `uri` begins, until it is over.
local function note_wait(uri, event)
  local key = util.key(uri) or ""
  if event.type == "auto_retry_start" then
    local deadline = vim.uv.now() + (event.delayMs or 0)
    waits[key] = { attempt = event.attempt, max = event.maxAttempts, deadline = deadline, root = session.root_of(uri) }
  elseif WAIT_OVER[event.type] then
    waits[key] = nil
  end
end

local function on_turn(note_params)
  local event, uri = note_params.event or {}, session.turn_uri(note_params)
  note_wait(uri, event)
  local chat = chats[util.key(uri) or ""]
  if not chat or not vim.api.nvim_buf_is_valid(chat.buf) then
    return
  end
  if not BEFORE_RETRY[event.type] then
    settle_failed(chat, event.type == "auto_retry_start")
  end
  local handler = on_event[event.type]
  if handler then
    handler(chat, event)
    draw_live(chat)
  end
end

-- -- sending ------------------------------------------------------------------------------------

--- The texts of `uri`'s session awaiting pi.prompt's answer (see `unanswered`).
local function unanswered_of(uri)
  local key = util.key(uri) or ""
  unanswered[key] = unanswered[key] or {}
  return unanswered[key]
end

--- The key of the session whose awaited texts are `list` now: it moves with its session, so a
--- wiped chat's late answer finds where that session went, not the file it left.
local function session_key_of(list)
  for key, texts in pairs(unanswered) do
    if texts == list then
      return key
    end
  end
end

--- Queue `message` ({ text, context }) in `chat` as pi.prompt queued it (`delivery`), with its
--- note: it goes with its message when delivered, or back to the input at the turn's end.
local function queue(chat, delivery, message)
  local what = delivery == "steer" and "steering" or "follow-up queued"
  -- Its own note (not note()'s, merged with an equal last one): it goes with its message.
  local item = add_note(chat, { text = ("_↳ %s: %s_"):format(what, (message.text:gsub("\n", " "))) })
  table.insert(chat.queued, { delivery = delivery, text = message.text, context = message.context, note = item })
end

--- pi.prompt answered for a chat wiped since: its input is gone (a buffer of that name is the new
--- chat's), so what the answer gives back or queues goes to `now`, the chat open on the session.
local function answered_elsewhere(now, message, err, result)
  if err then
    util.error("pi.prompt: " .. (err.message or tostring(err)))
  end
  if not now then
    return
  end
  if err or result.dropped then
    if not err then
      -- queue_dropped names it too: given back here, not again there.
      table.insert(now.given_back, { text = message.text, early = not now.busy })
    end
    put_back(now, { message })
    util.warn("your message did not reach pi; it is back in the input")
  elseif result.queued then
    queue(now, result.queued, message)
  end
  draw_live(now)
end

--- Send the input as a prompt, a steering message or a follow-up.
function M.send(chat, delivery)
  local text = input_text(chat)
  if text == "" then
    return util.warn("the input is empty")
  end
  local keys = config.options.chat.keys
  if delivery == "prompt" and chat.busy then
    return util.warn(("pi is busy: %s steers it, %s queues a follow-up, %s aborts"):format(keys.steer, keys.follow_up, keys.abort))
  end
  if delivery == "steer" and not chat.busy then
    -- The server would start a turn with it; a steer is only for a running turn.
    return util.warn(("nothing to steer: pi is not running (%s sends the input as a prompt)"):format(keys.send))
  end
  local args = { uri = chat.uri, text = text }
  if delivery ~= "prompt" then
    args.delivery = delivery
  end
  local attached = vim.list_slice(chat.context) -- what is attached now: more may be meanwhile
  if #attached > 0 then
    args.context = vim.tbl_map(function(item)
      return item.context
    end, attached)
  end
  local turns = chat.turns
  local file, since = chat.uri, sessionfile.size(chat.uri) -- what the turn writes comes after
  local waiting = unanswered_of(chat.uri)
  if delivery ~= "prompt" then
    table.insert(waiting, text) -- queue_dropped may name it before its answer comes
  end
  client.exec("pi.prompt", args, function(err, result)
    if delivery ~= "prompt" then
      take_text(waiting, text)
    end
    result = result or {}
    local now = chats[session_key_of(waiting) or ""]
    if now ~= chat then
      return answered_elsewhere(now, { text = text, context = attached }, err, result)
    end
    if err then
      return util.error("pi.prompt: " .. (err.message or tostring(err)))
    end
    if result.dropped then
      -- Aborted while its attached file was asked about: the text and code stay to send again,
      -- given back before the turn it was sent behind began if that turn's prompt had not.
      table.insert(chat.given_back, { text = text, early = not chat.busy })
      return util.warn("the turn was aborted before your queued message reached pi; it is still in the input")
    end
    vim.api.nvim_buf_set_lines(input_of(chat), 0, -1, false, {})
    -- The code sent is now the message's (it comes back with the text if pi does not get it);
    -- code attached while the server answered goes with the next message.
    chat.context = vim.tbl_filter(function(item)
      return not vim.tbl_contains(attached, item)
    end, chat.context)
    if result.queued then
      queue(chat, result.queued, { text = text, context = attached })
    else
      chat.notes = {}
      chat.turn_id = result.turnId
      if chat.turns == turns then
        -- Until its agent_start: an error before it loses the prompt.
        -- promptId: the entry the server is to write it as.
        chat.pending = { text = text, context = attached, file = file, since = since, id = result.promptId }
      end
    end
  end, chat.root)
end

function M.abort(chat)
  client.run("pi.abort", { uri = chat.uri }, function(result)
    if not result.aborted then
      util.notify("nothing is running")
    end
  end, chat.root)
end

-- -- approval -----------------------------------------------------------------------------------

--- A question's note, each line as written: a command's `*` and brackets are no markup; its line
--- breaks stay.
local function question_note(message)
  return table.concat(vim.tbl_map(function(line)
    return render.literal(line, "**")
  end, util.split_lines("⚠ " .. message)), "\n")
end

--- Show a question in the chat of `uri` while it is open; returns a function
--- that adds the answer to it.
function M.note_question(uri, message)
  local chat = chats[util.key(uri) or ""]
  local item = chat and vim.api.nvim_buf_is_valid(chat.buf) and note(chat, question_note(message))
  return function(answer)
    if item then
      item.text = item.text .. "  → " .. answer
      draw_live(chat)
    end
  end
end

--- Call `on_end(why)` once the turn of the session `uri` ends (agent_end or error) or its server
--- stops; returns the function that stops listening.
local function on_turn_end(uri, on_end)
  return util.on_turn_end(session.root_of(uri), function(note)
    local kind = note.event and note.event.type
    if (kind == "agent_end" or kind == "error") and util.key(session.turn_uri(note)) == util.key(uri) then
      return "the turn ended"
    end
  end, on_end)
end

--- window/showMessageRequest: the server asks before bash/write/edit. The
--- request names its session only in its text, so the note goes to the chat
--- whose turn runs, and the question goes when that turn ends (an abort: the
--- server no longer waits for it).
--- Answered from a coroutine (nvim ≥ 0.10 runs server requests in one), so the
--- editor keeps working while the question is open.
function M.approve(params)
  local actions = params.actions or {}
  local uri = session.busy_uri()
  local chat = chats[util.key(uri) or ""]
  local item = chat and vim.api.nvim_buf_is_valid(chat.buf) and note(chat, question_note(params.message or ""))
  local picker = util.picker()
  local settled, choice = false, nil
  local co, is_main = coroutine.running()
  local waits = co and not is_main
  local stop_listening
  local function settle(chosen)
    if settled then
      return -- answered already (or the turn ended first)
    end
    settled, choice = true, chosen
    stop_listening()
    if waits then
      -- Resume later: a synchronous vim.ui.select answers before we yield.
      vim.schedule(function()
        coroutine.resume(co)
      end)
    end
  end
  stop_listening = on_turn_end(uri, function()
    settle(nil)
    picker.close()
  end)
  if waits then
    picker.ask(function()
      vim.ui.select(actions, {
        prompt = params.message,
        kind = "pi_lsp_approval",
        format_item = function(action)
          return action.title
        end,
      }, settle)
    end)
    coroutine.yield()
  else
    local list = { params.message }
    for i, action in ipairs(actions) do
      list[#list + 1] = ("%d. %s"):format(i, action.title)
    end
    picker.ask(function()
      settle(actions[vim.fn.inputlist(list)])
    end)
  end
  if item then
    item.text = item.text .. "  → " .. (choice and choice.title or "no answer")
    draw_live(chat)
  end
  return choice or vim.NIL
end

-- -- windows ------------------------------------------------------------------------------------

--- A buffer of `chat` (the transcript or the input): its session, and the keys both map.
local function prepare_buffer(chat, buf)
  vim.b[buf].pi_lsp_uri = chat.uri
  vim.b[buf].pi_lsp_root = chat.root
  local keys = config.options.chat.keys
  util.map(buf, "n", keys.steer, function()
    M.send(chat, "steer")
  end, "pi: steer")
  util.map(buf, "n", keys.follow_up, function()
    M.send(chat, "followUp")
  end, "pi: follow up")
  util.map(buf, { "n", "i" }, keys.abort, function()
    M.abort(chat)
  end, "pi: abort")
  util.map(buf, "n", keys.close, function()
    M.close(chat.uri)
  end, "pi: close the chat")
end

--- The input buffer of `chat`, at its first open and again after a :bwipeout of it.
function make_input(chat)
  chat.input = util.scratch("pi://input/" .. name_of(chat.uri), "markdown", chat.uri)
  vim.bo[chat.input].modifiable = true
  prepare_buffer(chat, chat.input)
  local keys = config.options.chat.keys
  util.map(chat.input, "n", keys.send, function()
    M.send(chat, "prompt")
  end, "pi: send")
  util.map(chat.input, "i", keys.send_insert, function()
    M.send(chat, "prompt")
  end, "pi: send")
end

local function map_chat_keys(chat)
  local keys = config.options.chat.keys
  util.map(chat.buf, "n", keys.tree, function()
    util.emit("openTree", chat.uri) -- the tree sits above the chat (it fills the input)
  end, "pi: tree")
  util.map(chat.buf, "n", keys.context, function()
    require("pi_lsp.context").preview(chat.uri)
  end, "pi: context")
  -- Context edits on the message under the cursor; the chat re-reads the
  -- transcript when the session changes.
  local context = require("pi_lsp.context")
  context.map_edit_keys(chat.buf, function()
    return M.entry_at(chat, vim.api.nvim_win_get_cursor(0)[1])
  end)
  util.map(chat.buf, "n", keys.more, function()
    show_more(chat)
  end, "pi: show more of the transcript")
  util.map(chat.buf, "n", config.options.context.keys.help, function()
    util.notify(("%s send · %s steer · %s follow-up · %s abort · %s tree · %s context · %s more · %s · %s close"):format(
      keys.send, keys.steer, keys.follow_up, keys.abort, keys.tree, keys.context, keys.more, context.edit_help(), keys.close))
  end, "pi: keys")
end

--- The entry of the message at 1-based `line` of the chat buffer (nil for
--- none, or for a message that cannot be edited in the context).
function M.entry_at(chat, line)
  local found = entry_on(chat, line)
  local editable = { user = true, assistant = true, toolResult = true, custom = true }
  return found and (editable[found.role] or found.removed) and found.id or nil
end

--- The chat's session moved to a new file (session.lua says so and renames its buffers): the
--- chat goes on there, or its next prompt would go into the file cut short.
local function follow_move(chat, new)
  chats[util.key(chat.uri)], chats[util.key(new)] = nil, chat
  chat.uri = new
  if not chat.busy then
    resync(chat) -- its sessionChanged may have come before the chat followed
  end
end

local function create(uri)
  local root = session.root_of(uri)
  -- given_back: steers and follow-ups it gave back since its turn began ({ text, early }: early,
  -- before that turn began). The turn's queue_dropped names them and those still `unanswered`;
  -- it gives back the rest.
  local chat = { uri = uri, root = root, committed = render.builder(), budget = BUDGET, notes = {}, queued = {}, context = {},
    given_back = {}, busy = session.busy(uri), turns = 0 }
  chat.buf = util.scratch("pi://chat/" .. name_of(uri), "markdown", uri)
  prepare_buffer(chat, chat.buf)
  map_chat_keys(chat)
  make_input(chat)
  chat.resync = make_resync(chat)
  util.tie(chat.buf, {
    util.on("sessionChanged", function(change)
      -- Our own turn's appends are already on screen; others (a branch, another
      -- editor's turn) change what the current path is.
      if util.same(change.uri, chat.uri) and not chat.busy then
        resync(chat)
      end
    end),
    util.on("sessionMoved", function(old, new)
      if util.same(old, chat.uri) then
        follow_move(chat, new)
      end
    end),
    util.on("listed", function(listed_root)
      -- The title line alone, when it changed: a relist (at any change to any listed session)
      -- that redrew the chat moved its readers to its end, once a second while a turn ran.
      local title = "# " .. title_of(chat)
      if listed_root == root and not chat.live and vim.api.nvim_buf_is_valid(chat.buf)
        and vim.api.nvim_buf_get_lines(chat.buf, 0, 1, false)[1] ~= title then
        util.set_lines(chat.buf, 0, 1, { title })
      end
    end),
    function()
      chats[util.key(chat.uri)] = nil
      util.forget_folds(chat.buf)
    end,
  })
  chats[util.key(uri)] = chat
  local wait = chat.busy and waits[util.key(uri)]
  if wait then
    start_retry(chat, wait) -- its auto_retry_start came before the chat
  end
  -- The server loads the model's SDK now, not at the first prompt (a second or more). Only
  -- time is at stake: a missing key or provider is reported when a prompt is sent.
  client.exec("pi.prepareTurn", { uri = uri }, function() end, root)
  return chat
end

local STATUSLINE = "%{%v:lua.require'pi_lsp.session'.statusline()%}"

local function show(chat)
  local chat_win = vim.fn.bufwinid(chat.buf)
  local input_win = vim.fn.bufwinid(input_of(chat))
  if chat_win == -1 then
    if input_win ~= -1 then
      -- The chat's window closed alone (:q): the chat goes back above its input, which had
      -- taken the room.
      vim.api.nvim_set_current_win(input_win)
      vim.cmd("aboveleft split")
      vim.api.nvim_win_set_height(input_win, config.options.chat.input_height)
    else
      vim.cmd("botright vsplit")
    end
    chat_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(chat_win, chat.buf)
  end
  util.set_local(chat_win, { wrap = true, linebreak = true, number = false, winbar = STATUSLINE })
  util.markdown_window(chat_win)
  util.use_folds(chat_win, 0, true)
  if input_win == -1 then
    vim.api.nvim_set_current_win(chat_win)
    vim.cmd(("belowright %dsplit"):format(config.options.chat.input_height))
    input_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(input_win, chat.input)
  end
  local keys = config.options.chat.keys
  util.set_local(input_win, {
    winbar = ("pi input · %s send · %s steer · %s follow-up · %s abort"):format(
      keys.send,
      keys.steer,
      keys.follow_up,
      keys.abort
    ),
    number = false,
  })
  util.markdown_window(input_win)
  vim.api.nvim_set_current_win(input_win)
  return chat_win, input_win
end

--- Open the chat of `uri`. opts.input: text to put in the input.
function M.open(uri, opts)
  opts = opts or {}
  local chat = chats[util.key(uri)]
  local created = not chat
  chat = chat or create(uri)
  show(chat)
  if opts.input then
    M.set_input(uri, opts.input)
  end
  if not session.listed[chat.root] then
    session.list(function()
      draw_all(chat)
    end, chat.root)
  end
  if created or not chat.busy then
    resync(chat) -- a new chat reads the transcript even while a turn runs
  end
  if chat.busy then
    draw_all(chat) -- the live region, drawn at once
  end
  return chat
end

--- Put `text` in the chat input of `uri` (opening the chat if it is not
--- shown). A draft the user has not sent is never dropped unasked.
function M.set_input(uri, text)
  local chat = chats[util.key(uri)]
  if not chat or vim.fn.bufwinid(chat.input) == -1 then
    return M.open(uri, { input = text })
  end
  local function put()
    vim.api.nvim_buf_set_lines(input_of(chat), 0, -1, false, util.split_lines(text))
  end
  local draft = input_text(chat)
  if draft == "" or draft == vim.trim(text) then
    return put()
  end
  local choices = { "Replace the draft", "Keep the draft" }
  vim.ui.select(choices, { prompt = "The chat input holds a draft you have not sent" }, function(choice)
    if choice == choices[1] then
      put()
    else
      util.notify("the draft stays in the chat input")
    end
  end)
end

function M.close(uri)
  local chat = chats[util.key(uri)]
  if not chat then
    return
  end
  for _, buf in ipairs({ chat.input, chat.buf }) do
    for _, win in ipairs(vim.fn.win_findbuf(buf)) do
      util.close_window(win)
    end
  end
end

function M.command(arg)
  session.resolve(arg, function(uri)
    M.open(uri)
  end)
end

--- Code (from :PiSend / :PiAddFile) that goes with the next message (shown under the
--- transcript until it is sent).
function M.attach(uri, item)
  local chat = M.open(uri)
  table.insert(chat.context, item)
  draw_live(chat)
end

--- The chat state of `uri` (tests read it).
function M.get(uri)
  return chats[util.key(uri) or ""]
end

--- The server of `root` exited (a crash, a stop): its turns ended with no
--- agent_end, so its chats stop waiting and give back what was not delivered.
local function on_stopped(root)
  for key, wait in pairs(waits) do
    if wait.root == root then
      waits[key] = nil -- its turn died with the server
    end
  end
  for _, chat in pairs(chats) do
    if chat.root == root and vim.api.nvim_buf_is_valid(chat.buf) then
      local running = chat.busy or chat.live or chat.pending
      end_turn(chat)
      chat.stale = true
      if running then
        note(chat, "**⚠ the pi-lsp server stopped; the turn ended with it**", true)
      end
      draw_live(chat)
    end
  end
end

function M.setup_listeners()
  util.on("turn", on_turn)
  util.on("stopped", on_stopped)
  util.on("sessionMoved", function(old, new)
    -- A wait goes on where the session now is: a chat opened there shows it, one opened on
    -- the file cut short (a session of its own) does not.
    local from, to = util.key(old) or "", util.key(new) or ""
    if waits[from] then
      waits[to], waits[from] = waits[from], nil
    end
    if unanswered[from] then
      unanswered[to], unanswered[from] = unanswered[from], nil
    end
  end)
  util.on("initialized", function(root)
    -- What the stopped server had written is read from the one started since.
    for _, chat in pairs(chats) do
      if chat.root == root and chat.stale and vim.api.nvim_buf_is_valid(chat.buf) then
        chat.stale = false
        resync(chat)
      end
    end
  end)
end

return M
