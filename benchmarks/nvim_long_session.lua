-- Neovim on a long session, for benchmarks/bench_editors.py: how long the tree and the chat take
-- to show PI_LSP_SESSION, and how long Neovim's loop stalls while a turn streams into it (with
-- the tree open beside the chat, following the turn). Prints the figures as JSON.
local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local H = dofile(here .. "/../editors/nvim/tests/helpers.lua")
local uv = vim.uv
local uri = vim.uri_from_fname(assert(os.getenv("PI_LSP_SESSION"), "PI_LSP_SESSION is not set"))
local last_piece = assert(os.getenv("PI_LSP_LAST_PIECE"), "PI_LSP_LAST_PIECE is not set")

local function ms(since)
  return (uv.hrtime() - since) / 1e6
end

-- A timer due every 5 ms: a gap much longer than that is time the loop could not run,
-- which a user feels as keys that do not answer.
local gaps, last = {}, uv.hrtime()
local ticker = uv.new_timer()
ticker:start(5, 5, function()
  local now = uv.hrtime()
  gaps[#gaps + 1] = (now - last) / 1e6
  last = now
end)
local function stalls()
  gaps[#gaps + 1] = ms(last) -- the gap still open: a wait can end before the timer runs again
  local longest, over_50 = 0, 0
  for _, gap in ipairs(gaps) do
    longest = math.max(longest, gap)
    over_50 = over_50 + (gap > 50 and 1 or 0)
  end
  gaps, last = {}, uv.hrtime()
  return { longest_ms = longest, over_50ms = over_50 }
end

--- Whether the last lines of `buf` hold `needle` (the waits must not cost what they measure).
local function ends_with(buf, needle)
  local count = vim.api.nvim_buf_line_count(buf)
  local lines = vim.api.nvim_buf_get_lines(buf, math.max(0, count - 40), count, false)
  return table.concat(lines, "\n"):find(needle, 1, true) ~= nil
end

local figures = {}
local start = uv.hrtime()
H.setup()
figures.initialize_ms = ms(start)
stalls()

start = uv.hrtime()
require("pi_lsp.tree").open(uri)
local tree
H.wait(function()
  tree = H.find_buf("pi://tree/")
  return tree and H.contains(tree, "← leaf")
end, "the tree did not show", tree)
figures.tree_ms = ms(start)
figures.tree_lines = vim.api.nvim_buf_line_count(tree)

start = uv.hrtime()
require("pi_lsp.chat").open(uri)
local chat, input
H.wait(function()
  chat, input = H.find_buf("pi://chat/"), H.find_buf("pi://input/")
  return chat and input and ends_with(chat, "## ")
end, "the chat did not show the transcript", chat)
figures.chat_ms = ms(start)
figures.opening = stalls()

-- The tree's header counts the session's entries; the turn adds at least the prompt and the reply.
local function entries()
  return tonumber(H.lines(tree)[1]:match("(%d+) entries"))
end
local before = assert(entries(), "the tree's header does not count entries")

vim.api.nvim_set_current_buf(input)
vim.api.nvim_buf_set_lines(input, 0, -1, false, { "Count for the benchmark" })
start = uv.hrtime()
H.keys("<CR>")
H.wait(function()
  return ends_with(chat, "word0 ")
end, "the reply did not start streaming into the chat", chat)
figures.first_piece_ms = ms(start)
figures.waiting = stalls()
start = uv.hrtime()
H.wait(function()
  return ends_with(chat, last_piece)
end, "the reply did not stream into the chat", chat)
figures.stream_ms = ms(start)
figures.streaming = stalls()
start = uv.hrtime()
H.wait(function()
  local line = H.line_of(tree, "← leaf")
  return entries() >= before + 2 and line and H.lines(tree)[line]:find("assistant", 1, true)
end, "the tree did not follow the turn to its reply", tree)
figures.tree_follow_ms = ms(start)
-- The turn's end re-reads the transcript: the reply then carries its entry id.
local reply = H.lines(tree)[1]:match("leaf (%x+)$")
H.wait(function()
  return ends_with(chat, "`" .. reply .. "`")
end, "the chat did not re-read the transcript after the turn", chat)
figures.chat_reload_ms = ms(start)
figures.settling = stalls()
ticker:close()
io.stdout:write(vim.json.encode(figures) .. "\n")
H.finish()
