-- Two sessions' approval questions with vim.ui.select's own picker (vim.fn.inputlist, which
-- blocks until answered; the events go on meanwhile): A's opens, then B's opens over it, then
-- A's turn ends. A's question must go without answering B's, which stays for the user.
-- Run without -l (tests/test_nvim.py's run_blocking_script): under it inputlist reads stdin.
-- No server: the questions are asked as the server's requests would, and A's turn ends by its
-- turn event.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
vim.opt.runtimepath:prepend(H.plugin_dir)
local util, editor = require("pi_lsp.util"), require("pi_lsp.editor")
vim.ui.select = dofile(vim.env.VIMRUNTIME .. "/lua/vim/ui.lua").select

-- inputlist blocks this script too: what happens while it is open runs from a timer.
local inputlist = vim.fn.inputlist
local open, returned = {}, {} -- the sessions whose picker is open, innermost last; their picks
vim.fn.inputlist = function(list)
  local session = list[1]:match("echo (%u)")
  open[#open + 1] = session
  returned[session] = inputlist(list)
  table.remove(open)
  return returned[session]
end

local decisions = {}
local function ask(session)
  coroutine.wrap(function()
    local result = editor.approve_tool({ uri = "file:///w/" .. session .. ".jsonl",
      turnId = "turn" .. session, tool = "bash", command = "echo " .. session, title = session })
    decisions[session] = result.decision
  end)()
end

local asked_b, ended, typed_at, stuck = false, false, nil, false
local timer = vim.uv.new_timer()
timer:start(20, 20, vim.schedule_wrap(function()
  if open[1] == "A" and not asked_b then
    asked_b = true
    ask("B") -- session B's request comes while A's picker is open
  elseif #open == 2 and not ended then
    ended = true
    util.emit("turn", { turnId = "turnA", event = { type = "agent_end" } })
  elseif ended and decisions.A and not typed_at then
    typed_at = vim.uv.now()
    vim.api.nvim_input("1<CR>") -- the user allows B's, the picker in front
  elseif typed_at and #open > 0 and vim.uv.now() - typed_at > H.CEILING_MS then
    stuck = true -- only a hang gets here: the test ends instead of waiting for good
    vim.api.nvim_input("<Esc>")
  end
end))

ask("A")
H.wait(function()
  return typed_at ~= nil and #open == 0 and decisions.B ~= nil
end, "the questions did not end")
timer:stop()
timer:close()
H.check(not stuck, "a picker stayed open: " .. table.concat(open, " "))
H.check(decisions.A == "deny", "A's question, its turn ended, decided " .. tostring(decisions.A))
H.check(returned.B == 1 and decisions.B == "allow",
  ("B's question was answered %s, deciding %s, not by the user's Allow"):format(returned.B, decisions.B))
H.check(returned.A == 0, "A's picker was closed by a choice: " .. tostring(returned.A))
io.stdout:write("ok\n")
