"""pi 1.6's skills: the Markdown files it finds in your skills folders and a trusted project's,
listed in the system prompt by name, description and path for the model to read when needed."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pi_lsp.regular import read_regular
from pi_lsp.session.catalog import agent_dir

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
# A skill file's frontmatter is at its top: pi reads the whole file, pi-lsp only this much.
READ_LIMIT = 64 * 1024
# A committed tree may be deep or wide; pi walks all of it (skill folders are one or two down).
MAX_DEPTH = 8
MAX_ENTRIES = 4096  # folder entries looked at under one skills folder

Scalar = str | bool | None  # a frontmatter value as far as pi uses it: numbers and lists are None


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str
    hidden: bool  # `disable-model-invocation: true`: loaded only by its /skill command


class Unreadable(ValueError):
    """Frontmatter YAML refuses, or beyond the subset pi-lsp reads."""


# -- parsing ---------------------------------------------------------------------------------

_KEY = re.compile(r"([A-Za-z0-9_][\w.-]*):(?:[ \t]+(.*))?$")
_BLOCK = re.compile(r"([|>])([+-]?)([1-9]?)[ \t]*(?:#.*)?$")
_NUMBER = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|0o[0-7]+|"
                     r"0x[0-9a-fA-F]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_DOUBLE = re.compile(r'((?:[^"\\]|\\.)*)"[ \t]*(?:#.*)?', re.DOTALL)
_SINGLE = re.compile(r"((?:[^']|'')*)'[ \t]*(?:#.*)?", re.DOTALL)
_USED = ("name", "description", "disable-model-invocation")


def frontmatter(text: str) -> dict[str, Scalar]:
    """The top-level values of a skill file's frontmatter, as pi 1.6 finds it (parseFrontmatter)
    and YAML 1.2 reads it; {} when there is none. Unreadable when YAML would refuse it, or when
    a key pi uses is written in YAML pi-lsp does not read (anchors, tags, flow collections)."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    end = text.find("\n---", 3)
    if not text.startswith("---") or end == -1:
        return {}
    values: dict[str, Scalar] = {}
    for key, head, rest in _entries(text[4:end].split("\n")):
        if key in values:
            raise Unreadable(f"the key {key} is given twice")
        values[key] = _scalar(head, rest) if key in _USED else None
    return values


def _entries(lines: list[str]) -> Iterator[tuple[str, str, list[str]]]:
    """Each top-level key with the rest of its line and the indented or blank lines after."""
    entry: tuple[str, str, list[str]] | None = None
    for line in lines:
        if entry is not None and (not line.strip() or line[0] in " \t"):
            entry[2].append(line)
        elif line.strip() and not line.startswith("#"):
            if entry is not None:
                yield entry
            match = _KEY.match(line)
            if match is None:
                raise Unreadable(f"not a top-level key: {line[:40]!r}")
            entry = (match[1], match[2] or "", [])
    if entry is not None:
        yield entry


def _scalar(head: str, rest: list[str]) -> Scalar:
    """A key's value from the rest of its line (`head`) and its indented lines."""
    head = head.strip()
    if head[:1] in ("|", ">"):
        return _block(head, rest)
    while rest and not rest[-1].strip():
        rest = rest[:-1]
    if head[:1] in ('"', "'"):
        return _quoted(head, rest)
    if head[:1] in tuple("[]{}&*!%@`,?") or head.startswith(("- ", ": ")) or head == "-":
        raise Unreadable(f"a value pi-lsp does not read: {head[:40]!r}")
    head = "" if head.startswith("#") else head.split(" #")[0].rstrip()
    while not head and rest and not rest[0].strip():
        rest = rest[1:]
    if not head and rest and (rest[0].strip().startswith("-") or _KEY.match(rest[0].strip())):
        return None  # a list or a mapping: no text
    return _plain([head, *rest] if head else rest)


def _plain(lines: list[str]) -> Scalar:
    """A plain (unquoted) value, its lines folded, typed as YAML 1.2's core schema types it."""
    for line in lines:
        if ": " in line or line.rstrip().endswith(":") or " #" in line.replace("\t#", " #"):
            raise Unreadable(f"a plain value with a key or comment in it: {line[:40]!r}")
    text = _fold([line.strip() for line in lines]) if lines else ""
    if text in ("", "~", "null", "Null", "NULL") or _NUMBER.fullmatch(text):
        return None
    if text in ("true", "True", "TRUE", "false", "False", "FALSE"):
        return text[0] in "tT"
    return text


def _fold(lines: list[str]) -> str:
    """Lines joined as YAML folds them: a break is a space, or one break per blank line between
    (blank lines at the end are dropped)."""
    text, blanks = lines[0], 0
    for line in lines[1:]:
        if not line:
            blanks += 1
            continue
        text += ("\n" * blanks or " ") + line
        blanks = 0
    return text


def _quoted(head: str, rest: list[str]) -> str:
    """A single- or double-quoted value, its lines folded."""
    quote, body = head[0], "\n".join([head[1:], *rest])
    match = (_DOUBLE if quote == '"' else _SINGLE).fullmatch(body)
    if match is None or (quote == '"' and re.search(r"\\\n", match[1])):
        raise Unreadable(f"a quoted value pi-lsp does not read: {head[:40]!r}")
    lines = match[1].split("\n")
    text = _fold([lines[0].rstrip(), *(line.strip() for line in lines[1:-1]),
                  *(line.lstrip() for line in lines[1:][-1:])])
    return text.replace("''", "'") if quote == "'" else _unescape(text)


_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v",
            "f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
            "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match[1]
        if code[0] in "xuU":
            return chr(int(code[1:], 16))
        if code not in _ESCAPES:
            raise Unreadable(f"an unknown escape \\{code}")
        return _ESCAPES[code]
    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", one, text,
                  flags=re.DOTALL)


def _block(head: str, rest: list[str]) -> str:
    """A literal (|) or folded (>) block value, chomped as its header says."""
    match = _BLOCK.fullmatch(head)
    if match is None:
        raise Unreadable(f"a block header pi-lsp does not read: {head[:40]!r}")
    style, chomp, given = match[1], match[2], match[3]
    filled = [line for line in rest if line.strip()]
    if not filled:
        return ""
    indent = int(given) if given else len(filled[0]) - len(filled[0].lstrip(" "))
    if indent == 0 or any(not line.startswith(" " * indent) for line in filled):
        raise Unreadable("a block value less indented than its first line")
    lines = [line[indent:] for line in rest]
    leading = next(index for index, line in enumerate(lines) if line)
    trailing = next(index for index, line in enumerate(reversed(lines)) if line)
    lines = lines[leading:len(lines) - trailing]
    if style == ">" and any(line[:1] in (" ", "\t") for line in lines):
        raise Unreadable("a folded block value with more indented lines")
    body = "\n" * leading + ("\n".join(lines) if style == "|" else _fold(lines))
    return body + {"-": "", "+": "\n" * (trailing + 1)}.get(chomp, "\n")


def skill(path: str, text: str) -> Skill | None:
    """The skill a file declares, as pi 1.6 loads it (loadSkillFromFile): None without a
    description, or when its frontmatter cannot be read."""
    try:
        values = frontmatter(text)
    except Unreadable as error:
        if os.path.basename(path) == SKILL_FILE:
            log.warning("%s: not loaded as a skill because %s", path, error)
        return None
    description, name = values.get("description"), values.get("name")
    if not isinstance(description, str) or not description.strip():
        return None
    return Skill(name if isinstance(name, str) and name else
                 os.path.basename(os.path.dirname(path)),
                 description, path, values.get("disable-model-invocation") is True)


# -- finding ---------------------------------------------------------------------------------


@dataclass
class _Walk:
    """One skills folder's files as pi 1.6 collects them (collectSkillEntries), bounded: a
    folder with SKILL.md is one skill; else its `.md` files (in pi's folders, at the top only;
    in `.agents` ones, below it only) and its folders' skills, but dot folders and node_modules.
    `within`: a real folder no symlink may lead out of."""

    top: str
    agents: bool
    within: str | None
    left: int = MAX_ENTRIES
    seen: set[str] = field(default_factory=set)

    def files(self, folder: str, depth: int = 0) -> Iterator[str]:
        real = os.path.realpath(folder)
        if real in self.seen or not self.allowed(real, folder):
            return
        self.seen.add(real)
        try:
            names = sorted(os.listdir(folder), key=os.fsencode)  # Node's order (strcmp)
        except OSError:
            return
        self.left -= len(names)
        if self.left < 0:
            log.warning("%s: skills not looked for past %d entries", self.top, MAX_ENTRIES)
            return
        if SKILL_FILE in names and os.path.isfile(os.path.join(folder, SKILL_FILE)):
            yield os.path.join(folder, SKILL_FILE)
            return
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith(".") or name == "node_modules":
                continue
            if os.path.isfile(path) and name.endswith(".md") and \
                    (folder == self.top) != self.agents:
                yield path
            elif os.path.isdir(path) and depth < MAX_DEPTH:
                yield from self.files(path, depth + 1)

    def allowed(self, real: str, path: str) -> bool:
        if self.within is None or real == self.within or \
                real.startswith(self.within.rstrip("/") + "/"):
            return True
        log.warning("%s: not read for skills because it leads outside %s", path, self.within)
        return False


def _read_skill(path: str, walk: _Walk) -> Skill | None:
    if not walk.allowed(os.path.realpath(path), path):
        return None
    try:
        data = read_regular(Path(path), READ_LIMIT)
    except OSError as error:
        log.warning("%s: not read as a skill (%s)", path, error.strerror or error)
        return None
    return skill(path, data.decode("utf-8", "replace"))


def _user_agents_skills() -> str:
    """The Agent Skills folder of the user (pi's `~/.agents/skills`, HOME first)."""
    return os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".agents", "skills")


def _project_agents_folders(cwd: str) -> list[str]:
    """The folders whose `.agents/skills` pi reads for a project: `cwd` and those above it up
    to its git repository's top (the first with a `.git`), or to the root outside one."""
    folders = [cwd]
    while not os.path.exists(os.path.join(folders[-1], ".git")) and \
            os.path.dirname(folders[-1]) != folders[-1]:
        folders.append(os.path.dirname(folders[-1]))
    return folders


def skill_folders(root: str, trusted: bool) -> list[_Walk]:
    """Where pi 1.6 finds skills for a session in `root`, in its order: a `trusted` project's
    `.pi/skills`, then its `.agents/skills` from `root` up; then yours in pi's agent folder
    and `~/.agents/skills`. A project's are read only within the folder holding them."""
    cwd, mine = os.path.abspath(root), os.path.normpath(_user_agents_skills())
    walks = []
    if trusted:
        walks.append(_Walk(os.path.join(cwd, ".pi", "skills"), False, os.path.realpath(cwd)))
        walks += [_Walk(os.path.join(folder, ".agents", "skills"), True,
                        os.path.realpath(folder))
                  for folder in _project_agents_folders(cwd)
                  if os.path.join(folder, ".agents", "skills") != mine]
    return [*walks, _Walk(os.path.join(os.path.abspath(agent_dir()), "skills"), False, None),
            _Walk(mine, True, None)]


def find_skills(root: str, trusted: bool) -> list[Skill]:
    """pi 1.6's skills for a session in `root` (loadSkills over pi's folders): the first of
    each name, and of each real file."""
    found: dict[str, Skill] = {}
    real_paths: set[str] = set()
    for walk in skill_folders(root, trusted):
        for path in walk.files(walk.top):
            loaded = _read_skill(path, walk)
            real = os.path.realpath(path)
            if loaded is None or real in real_paths:
                continue
            if loaded.name in found:
                log.warning("%s: skill %r not loaded, %s has its name", path, loaded.name,
                            found[loaded.name].path)
                continue
            found[loaded.name] = loaded
            real_paths.add(real)
    return list(found.values())


def _escape(text: str) -> str:
    return text.translate({ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;",
                           ord('"'): "&quot;", ord("'"): "&apos;"})


def skills_section(skills: Sequence[Skill], tools: Sequence[str]) -> str | None:
    """pi 1.6's `skills` section (formatSkillsForPrompt) for skills the model may load with
    `tools` (read, else bash); None when it has no reader or no skill to list."""
    reader = next((name for name in ("read", "bash") if name in tools), None)
    shown = [skill for skill in skills if not skill.hidden]
    if reader is None or not shown:
        return None
    lines = ["The following skills provide specialized instructions for specific tasks.",
             f"Use {'the read tool' if reader == 'read' else 'bash'} to load a skill's file "
             "when the task matches its description.",
             "Resolve relative paths against the skill's directory (parent of SKILL.md). Use "
             "absolute paths in tool calls.", "", "<available_skills>"]
    for one in shown:
        lines += ["  <skill>", f"    <name>{_escape(one.name)}</name>",
                  f"    <description>{_escape(one.description)}</description>",
                  f"    <location>{_escape(one.path)}</location>", "  </skill>"]
    return "\n".join([*lines, "</available_skills>"])
