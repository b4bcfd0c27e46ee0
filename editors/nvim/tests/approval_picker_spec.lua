-- With toolApproval = "ask" and vim.ui.select's own picker (vim.fn.inputlist, which blocks until
-- answered; the events go on meanwhile): a question whose turn is aborted closes. It is
-- pi/approveTool's, or with PI_LSP_FALLBACK set the server's window/showMessageRequest (asked
-- of an editor that does not claim pi/approveTool).
-- Run without -l (tests/test_nvim.py's run_blocking_script): under it inputlist reads stdin.
-- Fake server: a bash call `echo never`.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
local fallback = os.getenv("PI_LSP_FALLBACK") == "1"
vim.opt.runtimepath:prepend(H.plugin_dir)
local editor, chat_mod = require("pi_lsp.editor"), require("pi_lsp.chat")
if fallback then
  editor.CAPABILITIES.experimental.piLsp.approveTool = false
end
local asked_by, answered -- which of the plugin's answers asked; whether it then answered
for name, module in pairs({ approve_tool = editor, approve = chat_mod }) do
  local answer = module[name]
  module[name] = function(...)
    asked_by = name
    local result = answer(...)
    answered = true
    return result
  end
end
H.setup()
vim.ui.select = dofile(vim.env.VIMRUNTIME .. "/lua/vim/ui.lua").select

-- inputlist blocks this script too: what happens while it is open runs from a timer.
local inputlist = vim.fn.inputlist
local open, aborted_at, returned, stuck = false, nil, nil, false
vim.fn.inputlist = function(...)
  open = true
  returned = inputlist(...)
  open = false
  return returned
end

vim.cmd("PiChat")
local chat_buf = H.wait_buf("pi://chat/", "All green: 14 passed.", "the chat did not render")
local input_buf = H.find_buf("pi://input/")
local chat = chat_mod.get(require("pi_lsp.session").last_uri)

local timer = vim.uv.new_timer()
timer:start(20, 20, vim.schedule_wrap(function()
  if open and not aborted_at then
    aborted_at = vim.uv.now()
    chat_mod.abort(chat)
  elseif open and vim.uv.now() - aborted_at > H.CEILING_MS then
    stuck = true -- only a hang gets here: the test ends instead of waiting for good
    vim.api.nvim_input("<Esc>")
  end
end))

vim.api.nvim_set_current_win(vim.fn.bufwinid(input_buf))
vim.api.nvim_buf_set_lines(input_buf, 0, -1, false, { "Run it" })
H.keys("<CR>")
-- Twice the ceiling: a picker left open is closed by the timer one ceiling after the abort,
-- for the check below to say so.
H.wait(function()
  return aborted_at ~= nil and not open
end, "the question was not asked", chat_buf, 2 * H.CEILING_MS)
timer:stop()
timer:close()
H.check(asked_by == (fallback and "approve" or "approve_tool"), "asked by " .. tostring(asked_by))
H.check(not stuck, "the picker stayed open after its turn was aborted")
H.check(returned == 0, "the picker was closed without a choice: " .. tostring(returned))
H.wait(function()
  return not chat.busy and H.contains(chat_buf, "✗ bash: Operation aborted")
end, "the aborted turn did not end in the chat", chat_buf)
H.wait(function()
  return answered
end, "the question's handler never returned", chat_buf)

H.finish()
