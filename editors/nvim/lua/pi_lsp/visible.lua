-- Text a model or a repository wrote, made safe to approve: nothing in it can
-- hide, reorder or fake what is around it. The Lua twin of the server's
-- pi_lsp/visible.py (its fallback question) and VS Code's plainText.ts.
local M = {}

-- Control and format characters (Unicode 14's Cc and Cf: bidi overrides,
-- zero-width ones), line and paragraph separators: spelled as escapes.
local UNSAFE = {
  { 0x00, 0x1F }, { 0x7F, 0x9F }, { 0xAD, 0xAD }, { 0x600, 0x605 }, { 0x61C, 0x61C },
  { 0x6DD, 0x6DD }, { 0x70F, 0x70F }, { 0x890, 0x891 }, { 0x8E2, 0x8E2 }, { 0x180E, 0x180E },
  { 0x200B, 0x200F }, { 0x2028, 0x202E }, { 0x2060, 0x2064 }, { 0x2066, 0x206F },
  { 0xFEFF, 0xFEFF }, { 0xFFF9, 0xFFFB }, { 0x110BD, 0x110BD }, { 0x110CD, 0x110CD },
  { 0x13430, 0x13438 }, { 0x1BCA0, 0x1BCA3 }, { 0x1D173, 0x1D17A }, { 0xE0001, 0xE0001 },
  { 0xE0020, 0xE007F },
}
-- White space left once the unsafe characters are escaped: the space
-- separators (Zs) and tabs (lines are split at their breaks first).
local WHITE = { [0x09] = true, [0x20] = true, [0xA0] = true, [0x1680] = true,
  [0x202F] = true, [0x205F] = true, [0x3000] = true }
for code = 0x2000, 0x200A do
  WHITE[code] = true
end
-- Longer runs of white space in a line are spelled as their length: they could
-- push what follows out of sight (`git status` + 1500 spaces + `; curl … | sh`);
-- so are runs of blank lines.
local LONG_RUN, MANY_BREAKS = 40, 3

local function codepoint(char)
  local b = { char:byte(1, -1) }
  if #b == 1 then
    return b[1]
  end
  local code = b[1] % (2 ^ (7 - #b))
  for i = 2, #b do
    code = code * 64 + b[i] % 64
  end
  return code
end

local function unsafe(code)
  for _, range in ipairs(UNSAFE) do
    if code >= range[1] and code <= range[2] then
      return true -- (tabs are white space and lines are split first: neither comes here)
    end
  end
  return false
end

--- An unsafe character as Python's repr spells it: \r, \x1b, \u202e, \U000e0001.
local function escaped(code)
  if code == 0x0D then
    return "\\r"
  end
  return (code < 0x100 and "\\x%02x" or code < 0x10000 and "\\u%04x" or "\\U%08x"):format(code)
end

local UTF8_CHAR = "[%z\1-\127\192-\247][\128-\191]*"

--- One line, unsafe characters spelled as escapes and runs of white space
--- longer than LONG_RUN as their length.
local function shown_line(line)
  local out, run = {}, {}
  local function flush()
    if #run > LONG_RUN then
      local kind = table.concat(run):match("^ +$") and "spaces" or "white space characters"
      table.insert(out, ("⟨%d %s⟩"):format(#run, kind))
    else
      table.insert(out, table.concat(run))
    end
    run = {}
  end
  for char in line:gmatch(UTF8_CHAR) do
    local code = codepoint(char)
    if WHITE[code] then
      table.insert(run, char)
    else
      flush()
      table.insert(out, unsafe(code) and escaped(code) or char)
    end
  end
  flush()
  return table.concat(out)
end

local function blank(line)
  for char in line:gmatch(UTF8_CHAR) do
    if not WHITE[codepoint(char)] then
      return false
    end
  end
  return true
end

--- `text` to approve: line breaks and tabs kept, other unsafe characters
--- spelled as escapes, runs of white space in a line longer than 40, and runs
--- of more than 3 line breaks, as their length.
function M.visible(text)
  local lines = vim.split(tostring(text or ""), "\n", { plain = true })
  local out, at = { shown_line(lines[1]) }, 1
  while at < #lines do
    local next = at + 1 -- the next line that is not blank (or the last)
    while next < #lines and blank(lines[next]) do
      next = next + 1
    end
    if next - at > MANY_BREAKS then
      table.insert(out, ("⟨%d line breaks⟩"):format(next - at) .. shown_line(lines[next]))
    else
      for line = at + 1, next do
        table.insert(out, "\n" .. shown_line(lines[line]))
      end
    end
    at = next
  end
  return table.concat(out)
end

return M
