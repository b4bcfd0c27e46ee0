-- :PiModel, :PiThinking, :PiRename and :PiCheck on the example session, and
-- the chat and the context preview rendered as Markdown (treesitter, conceal).
-- Environment: PI_LSP_DAMAGED, a session file with a damaged line.
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local workspace = os.getenv("PI_LSP_WORKSPACE")
local damaged = os.getenv("PI_LSP_DAMAGED")
local example = vim.tbl_filter(function(path)
  return path ~= damaged
end, vim.fn.glob(workspace .. "/.pi/sessions/*.jsonl", false, true))[1]
local uri = vim.uri_from_fname(example)
vim.cmd.edit(vim.fn.fnameescape(example))

local function preview()
  return H.exec("pi.previewContext", { uri = uri })
end

local function listed_name()
  for _, s in ipairs(H.exec("pi.listSessions").sessions) do
    if vim.uri_to_fname(s.uri) == example then
      return s.name
    end
  end
end

-- :PiModel without an argument picks from the server's models: by the name
-- pi's models.json gives them, the session's model marked.
vim.fn.writefile({ vim.json.encode({ providers = { ollama = {
  baseUrl = "http://127.0.0.1:9/v1", api = "openai-completions", apiKey = "ollama",
  models = { { id = "qwen2.5-coder:7b", name = "Qwen Coder", contextWindow = 32768 } },
}, ["odd\0provider"] = { -- vim.ui.select's default hands each line to vim.fn.inputlist
  baseUrl = "http://127.0.0.1:9/v1", api = "openai-completions", apiKey = "odd",
  models = { { id = "odd\nid", name = "Odd\0name", contextWindow = 1000 } },
} } }) }, workspace .. "/.pi/models.json")
local offered, shown
table.insert(H.selects, function(items, opts)
  offered = opts.format_item(items[1])
  shown = vim.tbl_map(opts.format_item, items)
  for _, m in ipairs(items) do
    if m.id:find("haiku", 1, true) then
      return m
    end
  end
end)
vim.cmd("PiModel")
H.wait(function()
  return (preview().model or ""):find("haiku", 1, true) ~= nil
end, "the picked model was not set: " .. tostring(preview().model))
H.check(offered and offered:find("tokens)", 1, true), "models are offered with their window: " .. tostring(offered))
local function line_of(id)
  return vim.iter(shown):find(function(line)
    return line:find(id, 1, true)
  end)
end
H.check(line_of("ollama/qwen2.5-coder:7b") == "Qwen Coder — ollama/qwen2.5-coder:7b  (32.8k tokens)", "the models.json name: " .. vim.inspect(shown))
H.check(vim.tbl_contains(shown, "Odd name — odd provider/odd id  (1k tokens)"), "a name and id on one line: " .. vim.inspect(shown))
H.check(line_of("anthropic/claude-opus-4-5 ") and line_of("anthropic/claude-opus-4-5 "):find("← current$"), "the current model is marked: " .. vim.inspect(shown))
H.check(#vim.tbl_filter(function(line)
  return line:find("← current", 1, true) ~= nil
end, shown) == 1, "one current model")
-- With an argument, and a clear error for a malformed one.
vim.cmd("PiModel anthropic/claude-opus-4-5")
H.wait(function()
  return preview().model == "anthropic/claude-opus-4-5"
end, "the named model was not set")
pcall(vim.cmd, "PiModel opus") -- an error message raises inside vim.cmd under `nvim -l`
H.check(H.said('the model must be PROVIDER/ID (for example anthropic/claude-sonnet-4-5), not "opus"'), "bad model: " .. table.concat(H.messages, " | "))
H.check(vim.tbl_contains(vim.fn.getcompletion("PiModel anthropic/claude-o", "cmdline"), "anthropic/claude-opus-4-5"), "models complete")

-- :PiThinking with and without a level.
vim.cmd("PiThinking low")
H.wait(function()
  return preview().thinkingLevel == "low"
end, "the thinking level was not set")
local offered
table.insert(H.selects, function(items)
  offered = items
  return items[#items]
end)
vim.cmd("PiThinking") -- only claude-opus-4-5's levels are offered, as pi's picker offers them
H.wait(function()
  return preview().thinkingLevel == "high"
end, "the picked thinking level was not set")
H.check(vim.deep_equal(offered, { "off", "minimal", "low", "medium", "high" }), "the model's levels: " .. vim.inspect(offered))
-- A level the model lacks: pi records the nearest it offers, and that is what is said.
vim.cmd("PiThinking max")
H.wait(function()
  return H.said(("thinking level of %s: high (the model offers no max)"):format(vim.fn.fnamemodify(example, ":t")))
end, "the level in force was not said: " .. table.concat(H.messages, " | "))
pcall(vim.cmd, "PiThinking extreme")
H.check(H.said('no thinking level "extreme" (one of: off, minimal, low, medium, high, xhigh, max)'), "bad level")
H.check(vim.deep_equal(vim.fn.getcompletion("PiThinking m", "cmdline"), { "minimal", "medium", "max" }), "levels complete")

-- :PiRename with a name, and asking with the current name filled in.
vim.cmd("PiRename Orders, faster")
H.wait(function()
  return listed_name() == "Orders, faster"
end, "the session was not renamed")
local asked
vim.ui.input = function(opts, on_confirm)
  asked = opts.default
  on_confirm("Orders: N+1 fixed")
end
H.wait(function()
  return require("pi_lsp.session").listed[workspace] ~= nil
end, "the session list was not read again")
vim.cmd("PiRename")
H.wait(function()
  return listed_name() == "Orders: N+1 fixed"
end, "the session was not renamed through the prompt")
H.check(asked == "Orders, faster", "the prompt starts from the current name: " .. tostring(asked))

-- :PiCheck: a clean session, then a damaged one into the quickfix list.
vim.cmd("PiCheck")
H.wait(function()
  return H.said(vim.fn.fnamemodify(example, ":t") .. ": no problems")
end, "the clean check was not reported")
vim.cmd("PiCheck " .. vim.fn.fnameescape(damaged))
H.wait(function()
  return #vim.fn.getqflist() > 0
end, "the problems did not reach the quickfix list")
local qf = vim.fn.getqflist({ title = 1, items = 1 })
H.check(qf.title == "pi check: " .. vim.fn.fnamemodify(damaged, ":t"), "quickfix title: " .. qf.title)
local item = qf.items[1]
H.check(vim.api.nvim_buf_get_name(item.bufnr) == damaged and item.lnum == 3, "the problem points at line 3: " .. vim.inspect(item))
H.check(item.text:find("^malformed"), "the problem's kind leads: " .. item.text)
H.check(vim.bo[vim.api.nvim_get_current_buf()].buftype == "quickfix", "the quickfix window opened")
vim.cmd("cclose")

-- The chat and the context preview are Markdown with treesitter highlighting.
vim.cmd.edit(vim.fn.fnameescape(example))
vim.cmd("PiChat")
local chat = H.wait_buf("pi://chat/", "## You", "the chat did not open")
H.check(vim.treesitter.highlighter.active[chat] ~= nil, "the chat is highlighted by treesitter")
H.check(vim.wo[vim.fn.bufwinid(chat)].conceallevel == 2, "the chat conceals Markdown markup")
H.check(H.lines(chat)[1] == "# Orders: N+1 fixed", "the chat's title is the name", chat)
-- A rename shows in the open chat's title.
vim.cmd("PiRename Orders done")
H.wait(function()
  return H.lines(chat)[1] == "# Orders done"
end, "the chat's title did not follow the rename", chat)
vim.cmd("PiContext")
local context = H.wait_buf("pi://context/", "# Context at", "the context preview did not open")
H.check(vim.treesitter.highlighter.active[context] ~= nil, "the preview is highlighted by treesitter")
H.check(vim.wo[vim.fn.bufwinid(context)].conceallevel == 2, "the preview conceals Markdown markup")
local heading = vim.treesitter.get_node({ bufnr = context, pos = { 0, 0 } })
H.check(heading and heading:type():find("atx") ~= nil, "the title parses as a heading: " .. (heading and heading:type() or "nil"))

H.finish()
