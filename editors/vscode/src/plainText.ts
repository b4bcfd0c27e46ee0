/**
 * Text from sessions and the server as VS Code shows it: notifications and dialogs render
 * `[label](command:...)` as a link that runs the command, and quick picks and notifications render
 * `$(name)` as an icon; a zero-width space after `]` or `$` keeps both plain text.
 */
export function plain(text: string): string {
  return text.replace(/([\]$])\(/g, "$1\u200b(");
}

// What the server's previews (pi_lsp/session/outline.py `shorten`) turn into a space, as
// pi_lsp/visible.py's UNSAFE: control characters, line and paragraph separators, bidi controls.
const PREVIEW_UNSAFE = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const PREVIEW_CHARS = 72;

/** Session text on one line, as the server's previews are: it can neither fake a line nor
 * reorder one (an id's or a cwd's U+202E would turn the rest of its row around). */
export function oneLine(text: string): string {
  return text.replace(PREVIEW_UNSAFE, " ").split(/\s+/).filter(Boolean).join(" ");
}

/** Session text on one line (`oneLine`), cut at `limit` as the server's previews are. */
export function shorten(text: string, limit = PREVIEW_CHARS): string {
  const flat = oneLine(text);
  const head: string[] = [];
  // Code points, as Python counts them (a cut never splits a surrogate pair); no more than the
  // limit are spread: a hostile session's error may be 65 MB.
  for (const char of flat) {
    if (head.length === limit) return head.slice(0, limit - 1).join("") + "…";
    head.push(char);
  }
  return flat;
}

// Control and format characters (bidi overrides, zero-width ones), line and paragraph separators:
// spelled as escapes, as the server's fallback question does (pi_lsp/visible.py).
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
const NAMED: Record<string, string> = { "\r": "\\r" };
// Longer runs of white space in a line are spelled as their length: they could push what follows
// out of sight (`git status` + 1500 spaces + `; curl … | sh`); so are runs of blank lines.
const LONG_RUN = 40;
const MANY_BREAKS = 3;
const SPACE_RUN = new RegExp(`[^\\S\\n]{${LONG_RUN + 1},}`, "gu");
const BREAK_RUN = new RegExp(`\\n(?:[^\\S\\n]*\\n){${MANY_BREAKS},}`, "gu");

function escaped(char: string): string {
  const code = char.codePointAt(0) ?? 0;
  if (NAMED[char]) return NAMED[char];
  if (code < 0x100) return `\\x${code.toString(16).padStart(2, "0")}`;
  if (code < 0x10000) return `\\u${code.toString(16).padStart(4, "0")}`;
  return `\\U${code.toString(16).padStart(8, "0")}`;
}

function spaces(run: string): string {
  return `⟨${run.length} ${/^ +$/.test(run) ? "spaces" : "white space characters"}⟩`;
}

/** Text a model or a repository wrote, to approve: line breaks and tabs kept, other unsafe
 * characters spelled as escapes, long runs of white space in a line, and of blank lines, as their
 * length. */
export function visible(text: string): string {
  return text.replace(UNSAFE, (char) => (char === "\n" || char === "\t" ? char : escaped(char)))
    .replace(BREAK_RUN, (run) => `⟨${run.split("\n").length - 1} line breaks⟩`)
    .replace(SPACE_RUN, spaces);
}
