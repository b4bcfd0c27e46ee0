"""pi 1.6's skills: the Markdown files it finds in your skills folders and a trusted project's,
listed in the system prompt by name, description and path for the model to read when needed."""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING

from pi_lsp.agent.ignorerules import IgnoreRules, name_between_stars
from pi_lsp.jsonfile import read_object
from pi_lsp.regular import read_regular, settled, stat_key
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.jsontext import JS_WHITESPACE

if TYPE_CHECKING:
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import SafeConstructor
    from ruamel.yaml.nodes import Node
    from ruamel.yaml.resolver import VersionedResolver
    from ruamel.yaml.scanner import Scanner

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
# A skill file's frontmatter is at its top: pi reads the whole file, pi-lsp only this much.
READ_LIMIT = 64 * 1024
# pi limits a description to 1,024 characters and a name to 64 (loading a longer one with a
# warning): even written all in escapes, with the Agent Skills spec's other fields, a real
# skill's frontmatter stays far under this. One past it is not parsed (pi reads it): ruamel.yaml
# took 1.2 to 1.9 s on 64 K characters of nested sequences, 57 ms on 16 K of plain keys.
FRONTMATTER_LIMIT = 16 * 1024  # characters
# A committed tree may be deep or wide; pi walks all of it (skill folders are one or two down).
MAX_DEPTH = 8
MAX_ENTRIES = 4096  # folder entries looked at under one skills folder
# The ignore files pi follows in a skills folder and below; a folder's real ones are small, and
# each rule is tried on every entry: past these, pi-lsp reads and uses no more.
IGNORE_FILES = (".gitignore", ".ignore", ".fdignore")
IGNORE_READ_LIMIT = 64 * 1024
MAX_IGNORE_RULES = 512  # under one skills folder
# Skill files parsed so far, by file (parsing their YAML was 85% of a prompt's build: 600 ms
# at 1,000 skills, at every turn and preview); least recently used dropped past this many.
CACHE_SIZE = 8192
# One build's time for parsing skill files, past which the rest are skipped: under the cap a
# frontmatter can still take seconds (ruamel.yaml's scanner is quadratic in flow nesting: 15 K
# characters of `[[[…]]]`, 1.9 s), and the CLI parses every file at every build. At load about
# 4, 4,096 skills with pi's longest descriptions built in 6.9 s, 1,000 in 1.3 s.
PARSE_SECONDS = 10.0
_clock: Callable[[], float] = time.monotonic  # a test's stands in for it
# Their characters under one skills folder, with the folders put before them: each is read
# into a regular expression: a deep folder's 512 rules were 1 MB and 2.3 s; 16 K, 0.3 s at most.
MAX_IGNORE_CHARS = 16 * 1024

# A trusted project's `skills` entries followed, and their characters: each glob is matched
# against each name of each skill file (1,000 of them took 42 s a build, compiled one by one),
# each path is walked; a real setting lists a few.
MAX_SETTING_ENTRIES = 256
MAX_SETTING_CHARS = 16 * 1024

Scalar = str | bool | None  # a frontmatter value as far as pi uses it: numbers and lists are None


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str
    hidden: bool  # `disable-model-invocation: true`: loaded only by its /skill command


class Unreadable(ValueError):
    """Frontmatter YAML refuses."""


class Oversized(Unreadable):
    """Frontmatter past FRONTMATTER_LIMIT, not parsed: pi would read it."""


@dataclass(frozen=True)
class _RolledDate:
    """A date Python has no day for (`2001-13-99`), which JavaScript's Date rolls over."""

    text: str


# -- parsing ---------------------------------------------------------------------------------

_USED = ("name", "description", "disable-model-invocation")
# The plain scalars YAML 1.2's core schema types, as the `yaml` package pi uses has them (its
# schema/core and common/null tests); any other plain scalar is a string. ruamel.yaml's own 1.2
# rules also read dates, `<<` merges and `1_000` as numbers, which pi reads as strings.
_CORE_SCHEMA = (
    ("bool", r"(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$", tuple("tTfF")),
    ("int", r"(?:0o[0-7]+|[-+]?[0-9]+|0x[0-9a-fA-F]+)$", tuple("-+0123456789")),
    ("float", r"(?:[-+]?(?:(?:\.[0-9]+|[0-9]+\.[0-9]*)(?:[eE][-+]?[0-9]+)?|"
              r"[0-9]+[eE][-+]?[0-9]+)|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     tuple("-+0123456789.")),
    ("null", r"(?:~|[Nn]ull|NULL)?$", ("", "~", "n", "N")),  # "": an empty value
)
_CORE_TAG = "tag:yaml.org,2002:"
MAX_ALIAS_COUNT = 100  # pi's `yaml` (maxAliasCount)


def frontmatter(text: str) -> dict[str, Scalar]:
    """The values pi uses of a skill file's frontmatter, as pi 1.6 finds it (parseFrontmatter)
    and YAML 1.2 reads it; {} when there is none. Unreadable when it cannot be read."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    end = text.find("\n---", 3)
    if not text.startswith("---") or end == -1:
        return {}
    if end - 4 > FRONTMATTER_LIMIT:
        raise Oversized(f"its frontmatter is over {FRONTMATTER_LIMIT >> 10} K characters "
                        "(pi-lsp's limit)")
    from ruamel.yaml.error import YAMLError  # only when a skill file is read: slow to import

    try:
        # The end ends the last line, as pi's `yaml` reads it: there `|` keeps its newline.
        values = _yaml().load(text[4:end].removesuffix("\n") + "\n")
    except YAMLError as error:
        raise Unreadable(f"YAML refuses its frontmatter: {str(error).splitlines()[0]}") from None
    except Exception as error:  # pi catches any error too: one skill must not break them all
        raise Unreadable(f"its frontmatter cannot be read ({type(error).__name__})") from None
    if not isinstance(values, dict):
        return {}
    return {key: _scalar(values[key]) for key in _USED if key in values}


def _excessive_aliases(root: Node) -> bool:
    """Whether pi's `yaml` refuses a document as "a resource exhaustion attack" (Alias.js): some
    anchor's uses so far (itself and each alias) times the aliases within it past 100."""
    met, first, end = _meetings(root)
    scalars = [0, *accumulate(scalar for _, scalar, _ in met)]  # scalars met before each
    aliases = [at for at, (node, _, _) in enumerate(met) if first[node] != at]
    uses: dict[int, int] = {}
    weights: dict[int, int] = {}  # pi's `aliasCount` of an aliased node
    for at, (node, _, used) in enumerate(met):
        if first[node] == at:
            uses[node] = 1
            continue
        if not used:
            continue
        uses[node] += 1
        if node not in weights:  # pi works a 0 out again, but it stays 0
            # pi's getAliasCount: the most of each scalar's 1 and each alias's uses times weight
            within = aliases[bisect_left(aliases, first[node]):bisect_left(aliases, end[node])]
            weights[node] = max([uses.get(met[alias][0], 0) * weights.get(met[alias][0], 0)
                                 for alias in within] +
                                [1] * (scalars[end[node]] > scalars[first[node]]), default=0)
        if uses[node] * weights[node] > MAX_ALIAS_COUNT:
            return True
    return False


def _meetings(root: Node) -> tuple[list[tuple[int, bool, bool]], dict[int, int], dict[int, int]]:
    """The document's nodes in order, as pi's `yaml` meets them (an alias is not gone into):
    each node's id, whether it is a scalar met for the first time and whether an alias there
    is a use (pi resolves a `!!merge` key's sources without counting them); where each node is
    first met and where what is within it ends. Not recursive: YAML nests deeper than Python's
    stack."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    met: list[tuple[int, bool, bool]] = []
    first: dict[int, int] = {}
    end: dict[int, int] = {}
    stack: list[tuple[Node, bool] | int] = [(root, True)]  # an id: the end of that node
    while stack:
        entry = stack.pop()
        if isinstance(entry, int):
            end[entry] = len(met)
            continue
        node, used = entry
        met.append((id(node), id(node) not in first and isinstance(node, ScalarNode), used))
        if id(node) in first:
            continue
        first[id(node)] = len(met) - 1
        stack.append(id(node))
        if isinstance(node, MappingNode):
            for key, value in reversed(node.value):
                stack += [(value, key.tag != f"{_CORE_TAG}merge"), (key, True)]
        elif not isinstance(node, ScalarNode):  # a merge key's list of sources: sources too
            stack += [(item, used) for item in reversed(node.value)]
    return met, first, end


def _scalar(value: object) -> Scalar:
    """A value as far as pi uses it: text, as a JavaScript string holds it (a pair of surrogates
    escaped in YAML one character, a lone one kept), or true or false."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return value if isinstance(value, bool) else None


def _yaml() -> YAML:
    """A YAML 1.2 safe loader that reads as the `yaml` package pi uses does: its core schema, a
    tab after a token as a space, unknown tags as none."""
    from ruamel.yaml import YAML

    loader = YAML(typ="safe", pure=True)
    loader.Resolver, loader.Scanner = _core_schema(), _tab_scanner()
    loader.Constructor = _untagging_constructor()
    return loader


@functools.cache
def _tab_scanner() -> type[Scanner]:
    """ruamel.yaml's scanner, taking tabs between tokens on a line as YAML 1.2 does
    (`description:\tfoo`, `foo\t# note`); it takes them as the start of a token."""
    from ruamel.yaml.scanner import Scanner

    class TabScanner(Scanner):
        def scan_to_next_token(self) -> None:
            while self.reader.column > 0 and self.reader.peek() in " \t":
                self.reader.forward()
            super().scan_to_next_token()

    return TabScanner


@functools.cache
def _untagging_constructor() -> type[SafeConstructor]:
    """ruamel.yaml's safe constructor, reading a value with a tag it does not know (`!foo bar`)
    or a core one it does not fit (`!!int abc`, `!!seq {a: b}`) as if untagged, as pi's `yaml`
    does (with a warning); ruamel.yaml refuses the one and fails on the other. It merges no
    keys."""
    from ruamel.yaml.constructor import ConstructorError, SafeConstructor
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    # The kind of node each core collection tag takes in pi's `yaml` (its `collection`); the
    # other core tags take scalars.
    collections = {"map": MappingNode, "set": MappingNode, "seq": SequenceNode,
                   "omap": SequenceNode, "pairs": SequenceNode}

    def untagged(constructor: SafeConstructor, node: Node) -> object:
        if isinstance(node, ScalarNode):
            return constructor.construct_scalar(node)
        if isinstance(node, MappingNode):
            return constructor.construct_mapping(node)
        return constructor.construct_sequence(node)

    def integer(constructor: SafeConstructor, node: Node) -> object:
        try:
            return constructor.construct_yaml_int(node)
        except ValueError:  # too many digits for Python: too big for JavaScript, Infinity
            return float(constructor.construct_scalar(node))

    def timestamp(constructor: SafeConstructor, node: Node) -> object:
        try:
            return constructor.construct_yaml_timestamp(node)
        except ValueError:  # a date to pi all the same, not text (no date at all refuses there)
            return _RolledDate(node.value)

    def paired(construct: Callable[[SafeConstructor, Node], object],
               ) -> Callable[[SafeConstructor, Node], object]:
        """`!!omap` or `!!pairs` as pi's `yaml` reads it: an item that is not a mapping is a key
        without a value; ruamel.yaml refuses it."""

        def construct_pairs(constructor: SafeConstructor, node: Node) -> object:
            items = [item if isinstance(item, MappingNode) else
                     MappingNode(f"{_CORE_TAG}map", [(item, ScalarNode(f"{_CORE_TAG}null", ""))])
                     for item in node.value]
            return construct(constructor, SequenceNode(node.tag, items, node.start_mark))

        return construct_pairs

    class UntaggingConstructor(SafeConstructor):
        def construct_document(self, node: Node) -> object:
            if _excessive_aliases(node):
                raise ConstructorError(None, None, "excessive alias count (pi's limit)",
                                       node.start_mark)
            return super().construct_document(node)

        def construct_non_recursive_object(self, node: Node, tag: str | None = None) -> object:
            """Reads a node of another kind than its core tag takes (`!!str {a: 1}`, `!!map
            [a]`) as if untagged, as pi's `yaml` does (with a warning); ruamel.yaml refuses it."""
            name = tag or node.tag or ""
            if name.startswith(_CORE_TAG) and \
                    not isinstance(node, collections.get(name.removeprefix(_CORE_TAG), ScalarNode)):
                return untagged(self, node)
            return super().construct_non_recursive_object(node, tag)

        def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[object, object]:
            """Merges nothing: `!!merge <<` is a plain key, as in YAML 1.2's core schema (nested
            merges of aliases take exponential time). A collection key is a key of its own."""
            mapping: dict[object, object] = {}
            for key_node, value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key_node, ScalarNode):
                    # pi makes it a string (`{ a: 1 }`): no used name, and never a repeated key
                    # (pi compares key nodes), where Python cannot even hash a list in a tuple
                    key = object()
                value = self.construct_object(value_node, deep=deep)
                if self.check_mapping_key(node, key_node, mapping, key, value):
                    mapping[key] = value
            return mapping

    UntaggingConstructor.add_constructor(None, untagged)
    for name, pattern, _ in _CORE_SCHEMA:
        construct = integer if name == "int" else getattr(SafeConstructor, f"construct_yaml_{name}")
        UntaggingConstructor.add_constructor(f"{_CORE_TAG}{name}",
                                             _if_fitting(re.compile(pattern), construct))
    UntaggingConstructor.add_constructor(f"{_CORE_TAG}timestamp", timestamp)
    for name in ("omap", "pairs"):
        UntaggingConstructor.add_constructor(
            f"{_CORE_TAG}{name}", paired(getattr(SafeConstructor, f"construct_yaml_{name}")))
    return UntaggingConstructor


def _if_fitting(pattern: re.Pattern[str], construct: Callable[[SafeConstructor, Node], object],
                ) -> Callable[[SafeConstructor, Node], object]:
    """A core tag's constructor, reading a scalar its tag's pattern does not fit as a string."""

    def fitting(constructor: SafeConstructor, node: Node) -> object:
        if isinstance(node.value, str) and not pattern.fullmatch(node.value):
            return constructor.construct_scalar(node)
        return construct(constructor, node)

    return fitting


@functools.cache
def _core_schema() -> type[VersionedResolver]:
    """ruamel.yaml's resolver, typing plain scalars by `_CORE_SCHEMA` alone."""
    from ruamel.yaml.resolver import VersionedResolver

    rules: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for name, pattern, firsts in _CORE_SCHEMA:
        for first in firsts:
            rules.setdefault(first, []).append((f"tag:yaml.org,2002:{name}", re.compile(pattern)))

    class CoreSchema(VersionedResolver):
        @property
        def versioned_resolver(self) -> dict[str, list[tuple[str, re.Pattern[str]]]]:
            return rules

    return CoreSchema


def skill(path: str, text: str) -> Skill | None:
    """The skill a file declares, as pi 1.6 loads it (loadSkillFromFile): None without a
    description, or when its frontmatter cannot be read."""
    try:
        values = frontmatter(text)
    except Unreadable as error:
        # pi reports what its YAML refuses in a SKILL.md only; an oversized file, pi would load
        if os.path.basename(path) == SKILL_FILE or isinstance(error, Oversized):
            log.warning("%s: not loaded as a skill because %s", path, error)
        return None
    description, name = values.get("description"), values.get("name")
    # As pi tests it: JavaScript's trim(), before lone surrogates are dropped from what is sent.
    if not isinstance(description, str) or not description.strip(JS_WHITESPACE):
        return None
    return Skill(_sent(name) if isinstance(name, str) and name else
                 os.path.basename(os.path.dirname(path)),
                 _sent(description), path, values.get("disable-model-invocation") is True)


def _sent(text: str) -> str:
    """`text` as pi sends it: lone surrogates dropped."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")


# -- finding ---------------------------------------------------------------------------------


def ignore_patterns(text: str, prefix: str) -> list[str]:
    """An ignore file's patterns as pi 1.6 adds them for a folder `prefix` (`a/b/`, or "" at
    the top) below the skills folder (addIgnoreRules, prefixIgnorePattern): the folder put
    after a negation's `!` and for a leading `/`; the `\\` of `\\!` taken off, so that at the
    top it negates."""
    patterns = []
    for line in re.split(r"\r?\n", text):
        trimmed = line.strip(JS_WHITESPACE)
        if not trimmed or trimmed.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:] if negated or line.startswith("\\!") else line
        pattern = f"{'!' if negated else ''}{prefix}{pattern.removeprefix('/')}"
        if pattern:
            patterns.append(pattern)
    return patterns


@dataclass
class _Walk:
    """One skills folder's files as pi 1.6 collects them (collectSkillEntries), bounded: a
    folder with SKILL.md is one skill; else its `.md` files (in pi's folders, at the top only;
    in `.agents` ones, below it only) and its folders' skills, but dot folders, node_modules
    and what its ignore files ignore. `within`: a real folder no symlink may lead out of."""

    top: str
    agents: bool
    within: str | None
    left: int = MAX_ENTRIES
    chars_left: int = MAX_IGNORE_CHARS
    seen: set[str] = field(default_factory=set)
    ignore: IgnoreRules = field(default_factory=IgnoreRules)

    def files(self, folder: str, depth: int = 0) -> Iterator[str]:
        real = os.path.realpath(folder)
        if real in self.seen or not self.allowed(real, folder):
            return
        self.seen.add(real)
        self.add_ignore_files(folder)
        try:
            names = sorted(os.listdir(folder), key=os.fsencode)  # Node's order (strcmp)
        except OSError:
            return
        skill_file = os.path.join(folder, SKILL_FILE)
        if SKILL_FILE in names and os.path.isfile(skill_file) and not self.ignored(skill_file):
            yield skill_file
            return
        # Only the folders walked count: a skill's own files (assets) are never looked at.
        self.left -= len(names)
        if self.left < 0:
            log.warning("%s: skills not looked for past %d entries", self.top, MAX_ENTRIES)
            return
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith(".") or name == "node_modules":
                continue
            if os.path.isfile(path) and name.endswith(".md") and \
                    (folder == self.top) != self.agents and not self.ignored(path):
                yield path
            elif os.path.isdir(path) and depth < MAX_DEPTH and not self.ignored(path + "/"):
                yield from self.files(path, depth + 1)

    def ignored(self, path: str) -> bool:
        """Whether the ignore files read so far skip `path` (a folder's ends in `/`)."""
        if not self.ignore.rules:  # no ignore file so far, as in most skills folders
            return False
        relative = os.path.relpath(path, self.top).replace(os.sep, "/")
        return self.ignore.ignores(relative + "/" * path.endswith("/"))

    def add_ignore_files(self, folder: str) -> None:
        """Adds the rules of `folder`'s ignore files, as pi does on entering it."""
        relative = os.path.relpath(folder, self.top).replace(os.sep, "/")
        prefix = "" if relative == "." else f"{relative}/"
        for name in IGNORE_FILES:
            path = os.path.join(folder, name)
            if not os.path.exists(path) or not self.allowed(os.path.realpath(path), path):
                continue
            try:
                data = read_regular(Path(path), IGNORE_READ_LIMIT + 1)
            except OSError as error:  # pi reads none of a folder, and waits on a FIFO
                log.warning("%s: not read (%s)", path, error.strerror or error)
                continue
            if len(data) > IGNORE_READ_LIMIT:
                log.warning("%s: only its first %d bytes are followed", path, IGNORE_READ_LIMIT)
                data = data[:data.rfind(b"\n", 0, IGNORE_READ_LIMIT) + 1]
            patterns = ignore_patterns(data.decode("utf-8", "replace"), prefix)
            room = max(MAX_IGNORE_RULES - len(self.ignore.rules), 0)
            sizes = accumulate(len(pattern) for pattern in patterns[:room])
            kept = patterns[:bisect_right(list(sizes), self.chars_left)]
            if len(kept) < len(patterns):
                log.warning("%s: ignore rules past %d, or %d characters, not followed", path,
                            MAX_IGNORE_RULES, MAX_IGNORE_CHARS)
            self.chars_left -= sum(map(len, kept))
            self.ignore.add(kept)

    def allowed(self, real: str, path: str) -> bool:
        return _allowed(real, path, self.within)


def _allowed(real: str, path: str, within: str | None) -> bool:
    """Whether `path` (really `real`) is within `within` (None: anywhere)."""
    if within is None or real == within or real.startswith(within.rstrip("/") + "/"):
        return True
    log.warning("%s: not read for skills because it leads outside %s", path, within)
    return False


_FileKey = tuple[bool, str, tuple[int, ...]]


class _Parsed:
    """Skill files parsed so far, by the project's trust (nothing read for an untrusted one
    answers a trusted one, or the reverse), path and file identity; thread-safe, as prompts
    are built off the event loop."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._skills: OrderedDict[_FileKey, Skill | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _FileKey) -> tuple[Skill | None] | None:
        """The skill (or None: none) parsed from the file as `key` finds it; None: not kept."""
        with self._lock:
            if key not in self._skills:
                return None
            self._skills.move_to_end(key)
            return (self._skills[key],)

    def put(self, key: _FileKey, loaded: Skill | None) -> None:
        with self._lock:
            self._skills[key] = loaded
            if len(self._skills) > self.size:
                self._skills.popitem(last=False)


_parsed = _Parsed(CACHE_SIZE)


@dataclass
class _Deadline:
    """When one build stops parsing skill files, and how many it has left unparsed since."""

    at: float
    missed: int = 0

    def passed(self) -> bool:
        """Whether a file may no longer be parsed; it counts as missed when so."""
        late = _clock() >= self.at
        self.missed += late
        return late


def _read_skill(path: str, within: str | None, trusted: bool, deadline: _Deadline,
                ) -> Skill | None:
    """The skill a file declares, parsed again only when the file changed since it was and
    the build's deadline has not passed."""
    if not path.endswith(".md") or not _allowed(os.path.realpath(path), path, within):
        return None
    try:
        # Before reading: a change after it is a newer file, never one taken for this one.
        info = os.stat(path)
        key = (trusted, path, stat_key(info))
        cached = _parsed.get(key)
        if cached is not None:
            return cached[0]
        if deadline.passed():
            return None
        data = read_regular(Path(path), READ_LIMIT)
    except OSError as error:
        log.warning("%s: not read as a skill (%s)", path, error.strerror or error)
        return None
    loaded = skill(path, data.decode("utf-8", "replace"))
    if settled(info):  # else parsed again at each build
        _parsed.put(key, loaded)
    return loaded


def _home() -> str:
    return os.environ.get("HOME") or os.path.expanduser("~")


def _user_agents_skills() -> str:
    """The Agent Skills folder of the user (pi's `~/.agents/skills`, HOME first)."""
    return os.path.join(_home(), ".agents", "skills")


def _project_agents_folders(cwd: str) -> list[str]:
    """The folders whose `.agents/skills` pi reads for a project: `cwd` and those above it up
    to its git repository's top (the first with a `.git`), or to the root outside one."""
    folders = [cwd]
    while not os.path.exists(os.path.join(folders[-1], ".git")) and \
            os.path.dirname(folders[-1]) != folders[-1]:
        folders.append(os.path.dirname(folders[-1]))
    return folders


def _project_folders(cwd: str) -> list[_Walk]:
    """A trusted project's skills folders, in pi 1.6's order: its `.pi/skills`, then its
    `.agents/skills` from `cwd` up; each read only within the folder holding it."""
    mine = os.path.normpath(_user_agents_skills())
    return [_Walk(os.path.join(cwd, ".pi", "skills"), False, os.path.realpath(cwd))] + \
        [_Walk(os.path.join(folder, ".agents", "skills"), True, os.path.realpath(folder))
         for folder in _project_agents_folders(cwd)
         if os.path.join(folder, ".agents", "skills") != mine]


def _user_folders() -> list[_Walk]:
    """Your skills folders, in pi 1.6's order: in pi's agent folder, then `~/.agents`."""
    return [_Walk(os.path.join(os.path.abspath(agent_dir()), "skills"), False, None),
            _Walk(os.path.normpath(_user_agents_skills()), True, None)]


# -- the `skills` setting ----------------------------------------------------------------------


def _setting_entries(path: Path) -> list[str]:
    """The `skills` entries of a settings.json as pi 1.6 reads them (the old object form's
    `customDirectories` too); none when it cannot be read."""
    try:
        value = read_object(path, "settings", ValueError).get("skills")
    except ValueError as error:
        log.warning("skills setting not read: %s", error)
        return []
    if isinstance(value, dict):
        value = value.get("customDirectories")
    return [entry for entry in value if isinstance(entry, str)] if isinstance(value, list) else []


def _capped(entries: list[str], path: Path) -> list[str]:
    """A project's `skills` entries up to MAX_SETTING_ENTRIES and MAX_SETTING_CHARS, those
    dropped named in one warning."""
    sizes = accumulate(len(entry) for entry in entries[:MAX_SETTING_ENTRIES])
    kept = entries[:bisect_right(list(sizes), MAX_SETTING_CHARS)]
    if len(kept) < len(entries):
        log.warning("%s: skills entries past %d, or %d characters, not followed: %d from %r on",
                    path, MAX_SETTING_ENTRIES, MAX_SETTING_CHARS, len(entries) - len(kept),
                    entries[len(kept)][:64])
    return kept


def _is_pattern(entry: str) -> bool:
    """Whether pi takes a `skills` entry for a pattern over the files found, not a path."""
    return entry[:1] in ("!", "+", "-") or "*" in entry or "?" in entry


def _expanded(path: str) -> str:
    """`~` and `~/...` as your home (pi's normalizePath)."""
    return _home() if path == "~" else \
        os.path.join(_home(), path[2:]) if path.startswith("~/") else path


def _entry_files(entries: Sequence[str], base: str, within: str | None
                 ) -> list[tuple[str, str | None]]:
    """The files a setting's path entries give, as pi collects them (collectFilesFromPaths):
    relative to `base`; a file as it is, a folder's as a skills folder's. Not a FIFO nor a
    device: they are neither."""
    files: list[tuple[str, str | None]] = []
    # A path named again gives the files it gave (each file is taken once): walked once.
    for path in dict.fromkeys(os.path.normpath(os.path.join(base, _expanded(
            entry.strip(JS_WHITESPACE)))) for entry in entries if not _is_pattern(entry)):
        if not os.path.exists(path) or not _allowed(os.path.realpath(path), path, within):
            continue
        if os.path.isdir(path):
            walk = _Walk(path, False, within)
            files += [(found, within) for found in walk.files(path)]
        elif os.path.isfile(path):
            files.append((path, within))
    return files


# A glob's `**`: any folders but dot ones, the fewest first or the most, or all to the end.
_FOLDERS_FEWEST, _FOLDERS_MOST = r"(?:(?!\.)[^/]*+/)*?", r"(?:(?!\.)[^/]*+/)*"
_FOLDERS_TO_END = r"(?:(?!\.)[^/]*+(?:/|\Z))*"


def _globs(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One expression matching what any of `patterns` matches (None: no pattern), compiled once
    a build: each glob on its own, asked for each name of each skill file, was compiled again
    past 256 of them, 42 s a build for 1,000 and 300 files."""
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{_glob(_expanded(pattern))})"
                               for pattern in dict.fromkeys(patterns)))


def _glob(pattern: str) -> str:
    """A glob as minimatch reads pi's, as a regular expression: `*` and `?` within a name (a
    name, not a leading dot), `**` alone for any folders but dot ones (and the empty name
    before an absolute path's `/`). Braces and classes are not read."""
    segments, out, block, after_folders = pattern.split("/"), [], "", False
    for at, segment in enumerate(segments):
        if segment != "**":
            block += _glob_name(segment) + "/" * (at < len(segments) - 1)
            continue
        # The names between `**`s take their leftmost place for good: a later one leaves the
        # rest less room (and no dot name it could cross), so nothing is tried again.
        if block:
            out.append(f"(?>{_FOLDERS_FEWEST * after_folders}{block})")
        block, after_folders = "", True
    if segments[-1] == "**":
        out.append(_FOLDERS_TO_END)
    else:
        out.append(_FOLDERS_MOST * after_folders + block)
    return "".join(out)


def _glob_name(segment: str) -> str:
    """A glob's name but `**`: `*` and `?` within it, not matching a leading dot; a `\\` makes
    the character after it one to match as it is (itself, last)."""
    if not segment:
        return ""
    parts, at = [""], 0
    while at < len(segment):
        char = segment[at]
        if char == "\\":
            parts[-1] += re.escape(segment[at + 1:at + 2] or char)
            at += 1
        elif char == "*":
            parts.append("")
        else:
            parts[-1] += "[^/]" if char == "?" else re.escape(char)
        at += 1
    start = "(?!\\.)" if segment[:1] in ("*", "?") else ""
    return f"(?=[^/]){start}{name_between_stars(parts)}"


def _names(path: str, base: str) -> list[str]:
    """What a pattern may name a skill file by (pi's matchesAnyPattern): relative to `base`,
    its name, its path; a SKILL.md's folder in each way too."""
    names = [os.path.relpath(path, base), os.path.basename(path), path]
    if os.path.basename(path) == SKILL_FILE:
        folder = os.path.dirname(path)
        names += [os.path.relpath(folder, base), os.path.basename(folder), folder]
    return names


@dataclass(frozen=True)
class _Entries:
    """A `skills` setting's entries as pi 1.6 applies them (applyPatterns to the files of the
    setting's paths, isEnabledByOverrides to a skills folder's): a glob limits the setting's,
    `!glob` leaves out, `+path` takes back, `-path` leaves out whatever."""

    includes: re.Pattern[str] | None  # the globs; None: the setting's files are not limited
    excludes: re.Pattern[str] | None  # `!glob`s
    taken_back: frozenset[str]  # `+path`s
    left_out: frozenset[str]  # `-path`s

    @classmethod
    def read(cls, entries: Sequence[str]) -> _Entries:
        """The entries, their globs compiled for the build."""
        return cls(_globs([entry for entry in entries
                           if _is_pattern(entry) and entry[0] not in "!+-"]),
                   _globs([entry[1:] for entry in entries if entry.startswith("!")]),
                   _exact(entries, "+"), _exact(entries, "-"))

    def enabled(self, path: str, base: str, setting: bool) -> bool:
        """Whether pi 1.6 loads a skill file, one of a `setting`'s paths or not."""
        if not (self.includes or self.excludes or self.taken_back or self.left_out):
            return True  # nothing limits, leaves out or takes back: every file (most skills)
        names = _names(path, base)
        exact = names[0:1] + names[2:4] + names[5:]  # relative or whole paths: not a name alone
        on = (not setting or _any_name(self.includes, names, True)) and \
            not _any_name(self.excludes, names, False)
        return (on or not self.taken_back.isdisjoint(exact)) and self.left_out.isdisjoint(exact)


def _exact(entries: Sequence[str], sign: str) -> frozenset[str]:
    """The paths of the entries starting with `sign` (pi's normalizeExactPattern)."""
    return frozenset(_expanded(entry[1:].removeprefix("./"))
                     for entry in entries if entry.startswith(sign))


def _any_name(globs: re.Pattern[str] | None, names: list[str], otherwise: bool) -> bool:
    """Whether `globs` match any of the names; `otherwise` when there are no globs."""
    if globs is None:
        return otherwise
    return any(globs.fullmatch(name) for name in names)


def skill_files(root: str, trusted: bool) -> list[tuple[str, str | None]]:
    """pi 1.6's skill files for a session in `root` (its package manager's resolve), each with
    the folder it must be read within: those of a trusted project's `skills` setting, then of
    its skills folders, then of your setting, then of your folders; each path as first found,
    each real file once, and only those the entries leave on."""
    cwd = os.path.abspath(root)
    project, mine = os.path.join(cwd, ".pi"), os.path.abspath(agent_dir())
    sources: list[tuple[list[str], str, str | None, list[_Walk]]] = [
        (_setting_entries(Path(mine, "settings.json")), mine, None, _user_folders())]
    if trusted:  # a project's setting names skills within the project only, as its folders'
        settings = Path(project, "settings.json")
        sources.insert(0, (_capped(_setting_entries(settings), settings), project,
                           os.path.realpath(cwd), _project_folders(cwd)))
    found: dict[str, tuple[bool, str | None]] = {}
    for entries, base, within, walks in sources:
        read = _Entries.read(entries)
        for path, limit in _entry_files(entries, base, within):
            found.setdefault(path, (read.enabled(path, base, True), limit))
        for walk in walks:  # a folder's patterns are relative to the folder holding it
            for path in walk.files(walk.top):
                found.setdefault(path, (read.enabled(path, os.path.dirname(walk.top), False),
                                        walk.within))
    reals: set[str] = set()
    files = []
    for path, (enabled, within) in found.items():
        real = os.path.realpath(path)
        if real not in reals:
            reals.add(real)
            files += [(path, within)] * enabled
    return files


def find_skills(root: str, trusted: bool) -> list[Skill]:
    """pi 1.6's skills for a session in `root` (loadSkills over its skill files): the first of
    each name, and of each real file."""
    found: dict[str, Skill] = {}
    files = skill_files(root, trusted)
    deadline = _Deadline(_clock() + PARSE_SECONDS)
    for path, within in files:
        loaded = _read_skill(path, within, trusted, deadline)
        if loaded is None:
            continue
        if loaded.name in found:
            log.warning("%s: skill %r not loaded, %s has its name", path, loaded.name,
                        found[loaded.name].path)
            continue
        found[loaded.name] = loaded
    if deadline.missed:  # the server's next build parses on from its cache
        log.warning("%d skill files not read: parsing skills took %g s, this build's limit",
                    deadline.missed, PARSE_SECONDS)
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
