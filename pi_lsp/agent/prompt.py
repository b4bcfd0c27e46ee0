"""The system prompt, pi 1.6's: who the agent is, its tools and rules, the project's notes,
the skills it may load and where it works."""

from __future__ import annotations

import codecs
import logging
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import msgspec

from pi_lsp.agent.access import inside, secret_reason
from pi_lsp.agent.skills import find_skills, skills_section
from pi_lsp.agent.tools import Tool, open_regular
from pi_lsp.agent.worktree import canonical, nested_worktree
from pi_lsp.context.layers import AgentSetup
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.session.catalog import agent_dir

log = logging.getLogger(__name__)

# pi 1.6's names for a folder's context file, the first that can be read chosen
CONTEXT_FILES = ("AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD")
NOTES_LIMIT = 32 * 1024
# SYSTEM.md and APPEND_SYSTEM.md (yours, or a trusted project's) are read whole, as pi reads
# them, up to about a million tokens (the largest context windows): more could never be sent,
# and a file of gigabytes must not be read.
PROMPT_LIMIT = 4 << 20
# pi 1.6's prompt files in an agent folder (yours, or a trusted project's `.pi/`): the first
# replaces the default prompt (preamble, tools and rules), the second is appended to it.
SYSTEM_FILE, APPEND_FILE = "SYSTEM.md", "APPEND_SYSTEM.md"

# pi-lsp's own words: pi's preamble says the model runs inside pi, which is not so here.
PREAMBLE = """You are a coding agent working inside the user's editor, on the project in the \
working directory below. Help with software tasks by reading code, running commands and making \
changes with your tools. Work in small verified steps: look before you change, and run the \
project's tests or commands to check what you did. Be brief in what you say; show paths and \
exact errors. Ask when a request is ambiguous instead of guessing at something destructive."""


def _read_notes(path: Path, root: Path | None, limit: int = NOTES_LIMIT) -> str | None:
    """The first `limit` bytes of a notes file, less a BOM (a cut logged); None (logged) when
    there is none, or it is no regular file (within `root`, if given) or looks like a secret."""
    if not os.path.lexists(path):
        return None
    # A committed symlink may lead to /proc/self/environ or ~/.aws/credentials; one within its
    # folder (CLAUDE.md -> AGENTS.md) is fine. The user's own folder has no such rule (as in
    # pi): its AGENTS.md may be a link into their dotfiles.
    real = Path(os.path.realpath(path))
    reason = secret_reason(path) or (
        None if root is None or inside(real, Path(os.path.realpath(root)))
        else f"it leads outside {root}")
    if reason is None:
        try:
            file = open_regular(path)
        except OSError as error:
            reason = error.strerror or str(error)
        else:
            if file is not None:
                with file:
                    data = file.read(limit + 1)
                if len(data) > limit:
                    _log_cut(str(path), limit)
                # not final: a character cut at the limit is dropped, not replaced
                return codecs.getincrementaldecoder("utf-8-sig")("replace").decode(data[:limit])
            reason = "it is not a regular file"
    log.warning("%s: not read as project notes because %s", path, reason)
    return None


@lru_cache(maxsize=64)  # once per file, not at every turn and preview
def _log_cut(path: str, limit: int) -> None:
    log.warning("%s: only its first %d KB are used", path, limit >> 10)


def _context_file(folder: Path, root: Path | None) -> tuple[str, str] | None:
    """The folder's context file as pi 1.6 picks it, the first of its names that can be read
    (within `root`, if given): its path and its first NOTES_LIMIT bytes."""
    for name in CONTEXT_FILES:
        text = _read_notes(folder / name, root)
        if text is not None:
            return str(folder / name), text
    return None


def _shadowed(here: Path, found: dict[Path, tuple[str, str] | None]) -> Path | None:
    """pi 1.6's findShadowedContextFile: in a linked worktree nested in its main repository,
    the main root's context file of the name the worktree's root uses (the repository's one
    file, which would be given twice). None: nothing is left out."""
    nested = nested_worktree(here)
    own = None if nested is None else found.get(nested[0])
    # A worktree file pi-lsp refused (a secret, a link out) shadows nothing: the main one stays.
    return None if nested is None or own is None else nested[1] / Path(own[0]).name


def project_notes(root: Path) -> list[tuple[str, str]]:
    """The context files the model is given, by path, as pi 1.6 finds them whatever the
    project's trust: your own in pi's agent folder, then those of the project's folder and of
    each folder above it, outermost first, less the main repository's when the project is a
    linked worktree nested in it. A file outside the agent folder is read only within the
    folder it is found in."""
    notes: dict[str, str] = {}
    mine = _context_file(agent_dir(), None)
    if mine is not None:
        notes.setdefault(*mine)
    here = Path(os.path.abspath(root))
    folders = [*reversed(here.parents), here]
    found = {folder: _context_file(folder, folder) for folder in folders}
    shadowed = _shadowed(here, found)
    for folder in folders:
        file = found[folder]
        # As pi compares it: by the folder's real path, not the file's, so the worktree's own
        # file is kept even when it links to the main one.
        if file is not None and canonical(folder) / Path(file[0]).name != shadowed:
            notes.setdefault(*file)
    return list(notes.items())


def prompt_file(root: Path, name: str, trusted: bool) -> str | None:
    """pi 1.6's SYSTEM.md or APPEND_SYSTEM.md: the project's `.pi/` one when the project is
    `trusted` (pi gates both on trust), else your own in pi's agent folder, whole as pi reads
    it (to PROMPT_LIMIT); None: neither."""
    if trusted:
        text = _read_notes(root / ".pi" / name, root, PROMPT_LIMIT)
        if text is not None:
            return text
    return _read_notes(agent_dir() / name, None, PROMPT_LIMIT)


def _rules(tools: Sequence[Tool]) -> str:
    """pi 1.6's rules (buildRules) for `tools`: each rule once, in order, as a list."""
    names = {tool.name for tool in tools}
    rules = ["Use bash for file operations like ls, rg, find"] \
        if "bash" in names and not names & {"grep", "find", "ls"} else []
    rules += [rule for tool in tools for rule in tool.guidelines]
    rules += ["Be concise in your responses", "Show file paths clearly when working with files"]
    return "\n".join(f"- {rule}" for rule in dict.fromkeys(rule.strip() for rule in rules) if rule)


def _project_context(notes: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(["Project-specific instructions and guidelines:", *(
        f'<project_instructions path="{path}">\n{text}\n</project_instructions>'
        for path, text in notes)])


def system_sections(root: Path, tools: Sequence[Tool], trusted: bool = False
                    ) -> dict[str, str]:
    """The prompt as pi 1.6 builds it (buildSystemPromptSections) and keeps it in a session:
    named sections in pi's order, each but the preamble wrapped in tags of its name; the
    project's `.pi/` prompt files and skills count only when it is `trusted`. Differs on
    purpose: the default preamble is pi-lsp's; no `docs` (pi's points into pi's install)."""
    custom = prompt_file(root, SYSTEM_FILE, trusted)
    sections = {}
    if not custom:  # as pi: an empty SYSTEM.md is none
        listed = "\n".join(f"- {tool.name}: {tool.snippet}" for tool in tools if tool.snippet)
        sections = {"tools": f"{listed or '(none)'}\n\nAdditional tools may be available.",
                    "rules": _rules(tools)}
    addendum = prompt_file(root, APPEND_FILE, trusted)
    if addendum:
        sections["addendum"] = addendum
    notes = project_notes(root)
    if notes:
        sections["project_context"] = _project_context(notes)
    skills = skills_section(find_skills(str(root), trusted), [tool.name for tool in tools])
    if skills:
        sections["skills"] = skills
    sections["cwd"] = str(root).replace("\\", "/")
    return {"preamble": custom or PREAMBLE, **{name: f"<{name}>\n{text}\n</{name}>"
                                     for name, text in sections.items()}}


def agent_setup(root: Path, tools: Sequence[Tool], registry: ModelRegistry,
                default_model: tuple[str, str], default_thinking_level: str,
                trusted: bool) -> AgentSetup:
    """What the agent working in `root` (its `.pi/` files loaded when `trusted`) adds to a
    request: its prompt, tools and models."""
    # As pi's toToolDeclaration: a copy of the schema, constrainedSampling where set.
    declarations = [msgspec.json.decode(msgspec.json.encode({
        "name": tool.spec.name, "description": tool.spec.description,
        "parameters": tool.spec.parameters,
        **({"constrainedSampling": tool.spec.constrained_sampling}
           if tool.spec.constrained_sampling is not None else {})})) for tool in tools]
    return AgentSetup(registry, default_model, default_thinking_level,
                      system_sections(root, tools, trusted), declarations)
