-- The options of require("pi_lsp").setup(), with their defaults.
-- Kept apart from init.lua so every module can read them without a cycle.
local M = {}

M.defaults = {
  -- How to start the server; `python -P -m pi_lsp.cli serve` works too (-P: not from the cwd).
  cmd = { "pi-lsp", "serve" },
  cmd_env = nil,
  -- The workspace root is the nearest folder holding one of these.
  root_markers = { ".pi", ".git" },
  -- Sent as initialization options (the server's `piLsp` settings):
  -- sessionDirs, model, summaryModel, thinkingLevel, toolApproval ("ask"|"auto"),
  -- durableLeafMoves, autoCompaction, anthropicApiKey, anthropicBaseUrl,
  -- diagnosticsFeedback.
  settings = {},
  -- Start the server at setup() instead of at the first command.
  autostart = true,
  -- What :PiSessions opens for a picked session: "tree", "chat" or "none".
  open = "tree",
  tree = {
    -- Records of leaf moves and context edits (pi's bookkeeping) as rows too.
    show_bookkeeping = false,
    -- Fold the branches that are not on the current path at first sight.
    fold_off_path = true,
    keys = {
      branch = { "<CR>", "b" },
      branch_summary = "s",
      label = "l",
      fork = "f",
      preview = "p",
      diff = "d",
      edit = "e",
      restore_files = "R",
      undo_restore = "U",
      chat = "c",
      refresh = "r",
      close = "q",
      help = "?",
    },
  },
  chat = {
    input_height = 5,
    keys = {
      send = "<CR>", -- normal mode, in the input
      send_insert = "<C-s>", -- insert mode, in the input
      steer = "S",
      follow_up = "F",
      abort = "<C-c>",
      tree = "T",
      context = "K",
      more = "+", -- twice as much of a long transcript
      close = "q",
    },
  },
  -- Editing the context (pi 1.6's context edits), on a message of the context
  -- buffer (:PiContext) or of the chat.
  context = {
    keys = { remove = "dd", replace = "cc", undo = "u", help = "?" },
  },
  -- pi/approveTool: a write or edit opens as a diff in a new tab.
  approval = {
    keys = { accept = "a", accept_session = "A", reject = "r" },
  },
}

M.options = vim.deepcopy(M.defaults)

--- tbl_deep_extend merges lists index by index (on 0.10), so a shorter `cmd`
--- would keep the default's tail; lists given by the user replace ours whole.
local function replace_lists(target, given)
  for key, value in pairs(given) do
    if type(value) == "table" and vim.islist(value) then
      target[key] = vim.deepcopy(value)
    elseif type(value) == "table" and type(target[key]) == "table" then
      replace_lists(target[key], value)
    end
  end
end

function M.set(opts)
  opts = opts or {}
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  replace_lists(M.options, opts)
  return M.options
end

return M
