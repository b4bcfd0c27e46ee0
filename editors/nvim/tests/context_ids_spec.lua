-- `dd` in the :PiContext buffer removes the message under the cursor whatever its entry id holds
-- (PI_LSP_IDS: a session whose ids hold a backtick and a line break, each naming another, and
-- whose second message holds NUL).
local H = dofile(vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h") .. "/helpers.lua")
H.setup()

local path = os.getenv("PI_LSP_IDS")
local uri = vim.uri_from_fname(path)

local function removed()
  return vim.tbl_map(function(mark)
    return mark.targetId
  end, H.exec("pi.previewContext", { uri = uri }).edits or {})
end

vim.cmd.edit(vim.fn.fnameescape(path))
vim.cmd("PiContext")
local preview = H.wait_buf("pi://context/ids", "fourth", ":PiContext did not render")
H.check(H.contains(preview, "## 3. user · 2 tokens · `` x `victim` ``"), "the id is one code span", preview)
H.check(H.contains(preview, "## 4. assistant · 2 tokens · `` y\\n`victim` ``"), "the id's line break is spelled", preview)
vim.api.nvim_set_current_win(vim.fn.bufwinid(preview))
local cases = {
  { "third", { "x `victim`" }, "## ~~user~~ · removed from the context · 2 → 0 tokens · `` x `victim` ``" },
  { "fourth", { "x `victim`", "y\n`victim`" }, "## ~~assistant~~ · removed from the context · 2 → 0 tokens · `` y\\n`victim` ``" },
}
for _, case in ipairs(cases) do
  local text, targets, heading = unpack(case)
  vim.api.nvim_win_set_cursor(0, { H.line_of(preview, text), 0 })
  H.keys("dd")
  H.wait(function()
    return #removed() == #targets
  end, "dd on " .. text .. " wrote no edit", preview)
  H.check(vim.deep_equal(removed(), targets), "dd removed the message under the cursor: " .. vim.inspect(removed()))
  H.wait(function()
    return H.contains(preview, heading)
  end, "the preview did not follow", preview)
  H.check(H.said(("removed %s from the context"):format(targets[#targets]:gsub("\n", " "))), "said on one line: " .. vim.inspect(H.messages))
end

-- `cc` asks through vim.ui.input, whose default one hands the prompt to vim.fn.input: one line.
vim.api.nvim_win_set_cursor(0, { H.line_of(preview, "## ~~assistant~~"), 0 })
table.insert(H.inputs, false)
H.keys("cc")
H.wait(function()
  return #H.inputs == 0
end, "cc did not ask")
H.check(H.asked.prompt == "What the model sees instead of y `victim`: ", "the question: " .. vim.inspect(H.asked))

-- A text holding NUL is not offered to edit (vim.fn.input would take it for a Blob).
vim.api.nvim_win_set_cursor(0, { H.line_of(preview, "second"), 0 })
table.insert(H.inputs, false)
H.keys("cc")
H.wait(function()
  return #H.inputs == 0
end, "cc did not ask")
H.check(H.asked.prompt == "What the model sees instead of ok: " and H.asked.default == "", "starts empty: " .. vim.inspect(H.asked))

H.finish()
