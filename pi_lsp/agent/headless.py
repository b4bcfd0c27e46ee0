"""`pi-lsp run`: one prompt to completion in a terminal, reply on stdout, tools on stderr."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pi_lsp.agent.events import (
    AgentEvent,
    AutoRetryStart,
    MessageUpdate,
    SummaryRetryScheduled,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.retry import waiting_note
from pi_lsp.cli_common import (
    EXIT_READER_GONE,
    discard_output,
    open_session,
    write_path_line,
)
from pi_lsp.context.layers import lost_model, provider_problem
from pi_lsp.context.projection import Projection, project_path
from pi_lsp.harness_factory import make_harness
from pi_lsp.providers.base import BlankApiKeyError, MissingApiKeyError, TextDelta
from pi_lsp.providers.factory import UnknownProviderError, provider_factory
from pi_lsp.providers.model_reference import ModelPatternError, resolve_model
from pi_lsp.providers.models_file import ModelsFileError, UnsetVariableError
from pi_lsp.providers.registry import DEFAULT_CONTEXT_WINDOW, ModelRegistry
from pi_lsp.providers.thinking import clamped_level
from pi_lsp.session.catalog import (
    SessionDirError,
    continuable,
    start_session,
)
from pi_lsp.session.entries import THINKING_LEVELS, AssistantMessage, TextContent
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import Settings, SettingsError, load_settings
from pi_lsp.trust import decide_without_asking
from pi_lsp.visible import printable

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
# C0 and C1 control characters but tab and newline: the escape sequences a reply could use to
# set the clipboard (OSC 52), hide text (SGR 8) or rewrite what is on screen (\r, CSI).
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class RunError(Exception):
    """A problem to report in one line before anything runs."""


@dataclass
class RunOptions:
    prompt: str
    session: str | None = None
    new: bool = False
    model: str | None = None
    thinking: str | None = None
    approve: bool | None = None  # --approve / --no-approve: trust the folder's .pi/ files or not


def parse_model(text: str) -> tuple[str, str]:
    """A model `read_model_flag` resolved, `PROVIDER/ID`, as its provider and id."""
    provider, _, model_id = text.partition("/")
    return provider, model_id


def read_model_flag(options: RunOptions, settings: Settings) -> RunOptions:
    """`options` with `--model PATTERN[:LEVEL]` resolved as pi 1.6 resolves it (`model_reference.
    resolve_model`): the model, as PROVIDER/ID, and the `--thinking` it stands for."""
    if not options.model:
        return options
    registry = settings.registry()

    def usable(name: str) -> bool:  # pi 1.6's hasConfiguredAuth: a key is set for it
        config = registry.provider(name)
        if config is None:
            return False
        try:  # auth.json's `!command` runs, as pi 1.6 runs it here; one that fails is no key
            return bool((config.user_key and settings.api_key(name)) or config.api_key)
        except UnsetVariableError:
            return False
        except (ModelsFileError, BlankApiKeyError):  # one is set, which the run names
            return True

    try:
        chosen = resolve_model(registry, options.model, options.thinking, usable)
    except ModelPatternError as error:
        raise RunError(printable(f"--model: {error}")) from None  # as typed, escaped
    return dataclasses.replace(options, model=f"{chosen.provider}/{chosen.model_id}",
                               thinking=chosen.level)


def new_session(options: RunOptions, workspace: Path, settings: Settings,
                path: Path | None = None) -> SessionTree:
    """A session (written at its first prompt) that begins with the model and thinking level
    the run uses: `--model` and `--thinking`, else the settings' defaults (the level clamped
    to the model, as pi starts one)."""
    provider, model_id = parse_model(options.model) if options.model else \
        settings.initial_model()
    registry = settings.registry()
    # Made before the session's folder (and the settings.json that points pi there): a run
    # that cannot call the model (no key, no such provider) leaves the workspace as it was.
    provider_factory(registry, settings.api_key, oauth_login=settings.oauth_login)(provider)
    model = registry.get(provider, model_id)
    level = clamped_level(model, options.thinking) if options.thinking else \
        settings.new_session_thinking_level(model)
    return start_session(workspace, provider, model_id, level, path)


def choose_session(options: RunOptions, workspace: Path, settings: Settings, vouched: bool
                   ) -> SessionTree:
    """`--session`, else the workspace's newest session, else a new one. A folder nobody
    trusted gets a new one: its sessions may have come with it, and a run's tools do not ask."""
    if options.session:
        path = Path(options.session)
        if path.is_symlink() and not path.exists():  # a session is never made through one
            raise RunError(f"{path}: a symlink to nothing; name the session file itself")
        return open_session(str(path)) if path.exists() else \
            new_session(options, workspace, settings, path)
    if not options.new:
        existing = continuable(workspace)
        if existing and vouched:
            return SessionTree.open(existing[0].path)
        if existing:
            print("pi-lsp: note: a new session: this folder is not trusted, so none of its "
                  "sessions is continued (name one with --session, or trust the folder)",
                  file=sys.stderr)
    return new_session(options, workspace, settings)


class TerminalPrinter:
    """Streams reply text to stdout and tool activity to stderr."""

    def __init__(self, out: TextIO, err: TextIO,
                 lost: Callable[[OSError, TextIO], object] = lambda _error, _stream: None
                 ) -> None:
        self.out, self.err = out, err
        self.at_line_start = True
        self.high_surrogate = ""  # the first half of a character split between two deltas
        self.lost = lost  # told once when stdout or stderr fails, and which
        self.failed: OSError | None = None  # why it failed (its reader gone, a full disk)

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta):
            self.write_text(event.delta.delta)
        elif isinstance(event, AutoRetryStart | SummaryRetryScheduled):  # a reply's, a summary's
            self.end_line()
            self.note(f"  ↻ {printable(waiting_note(event))}\n")
        elif isinstance(event, ToolExecutionStart):
            self.end_line()
            target = event.args.get("path") or event.args.get("command") or ""
            # The model's arguments, as they are: a control character shows as its escape.
            self.note(f"→ {printable(event.tool_name)} {printable(str(target)[:80])}\n")
        elif isinstance(event, ToolExecutionEnd):
            first = next((b.text for b in event.result.content if isinstance(b, TextContent)), "")
            if event.is_error:
                last_line = first.strip().splitlines()[-1][:100] if first.strip() else ""
                self.note(f"  ✗ {printable(event.tool_name)}: {printable(last_line)}\n")
            else:
                self.note(f"  ✓ {printable(event.tool_name)}\n")

    def write_text(self, text: str) -> None:
        """Reply text as it streams, without control characters (tab and newline aside); a
        lone surrogate (a model can send one) shows as U+FFFD."""
        text, self.high_surrogate = self.high_surrogate + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self.high_surrogate = text[:-1], text[-1]
        # Dropped whether or not stdout is a terminal: a reply saved to a file reaches one when
        # it is shown, and no reply needs them.
        shown = CONTROLS.sub("", text.encode("utf-16", "surrogatepass").decode("utf-16",
                                                                                "replace"))
        self.show(shown)
        if shown:
            self.at_line_start = shown.endswith("\n")

    def end_line(self) -> None:
        if self.high_surrogate:
            self.high_surrogate = ""
            self.show("\ufffd")
            self.at_line_start = False
        if not self.at_line_start:
            self.show("\n")
            self.at_line_start = True

    def show(self, text: str) -> None:
        """Reply text on stdout now."""
        self._write(self.out, text)

    def note(self, text: str) -> None:
        """Tool activity on stderr now."""
        self._write(self.err, text)

    def notice(self, message: str) -> None:
        """pi-lsp's word to the user on stderr now, on a line of its own."""
        self.end_line()
        self.note(f"pi-lsp: note: {printable(message)}\n")

    def _write(self, stream: TextIO, text: str) -> None:
        """Once either stream fails, nothing more: an error raised here would go through the
        run's events and cut the turn short before its reply is saved."""
        if self.failed is not None:
            return
        try:
            stream.write(text)
            stream.flush()
        except OSError as error:
            self.failed = error
            self.lost(error, stream)


async def run_prompt(options: RunOptions, workspace: Path, settings: Settings, vouched: bool
                     ) -> int:
    if options.thinking and options.thinking not in THINKING_LEVELS:
        raise RunError(f"--thinking must be one of {', '.join(THINKING_LEVELS)}")
    options = read_model_flag(options, settings)
    wanted = parse_model(options.model) if options.model else None
    tree = choose_session(options, workspace, settings, vouched)  # a new one: at its reply

    def output_lost(_error: OSError, stream: TextIO) -> None:
        # As a writer whose reader is gone stops (SIGPIPE): nobody sees the reply or tools.
        discard_output(stream)
        harness.abort()

    printer = TerminalPrinter(sys.stdout, sys.stderr, output_lost)
    harness = make_harness(tree, workspace, settings, tell_slow=printer.notice)
    projection = project_path(tree.path_to(tree.leaf_id))
    # A path with no message yet starts as pi 1.6 starts a new session: the flags, else the
    # settings' defaults, whatever model and level the path set (recorded below). One it
    # continues runs on the flags: the model for this run only (the session's follows its
    # replies), the level recorded at the prompt's start where it changes the branch's
    # (Harness._record_level).
    start = harness.start_choice(projection, wanted, options.thinking)
    if start is None:
        harness.run_model = wanted or fallback_model(harness, projection)
        if options.thinking:
            harness.run_thinking_level = clamped_level(harness.model(), options.thinking)
    current = harness.model() if start is None else harness.registry.get(*start[0])
    # Only the provider the run uses is made: a missing key or unknown provider fails here,
    # before anything is written.
    harness.provider(wanted[0] if wanted else current.provider)
    if wanted and harness.registry.find(*wanted) is None:  # (pi warns of ids its catalog lacks)
        print(f"pi-lsp: note: pi-lsp's catalog has no {printable(wanted[0])!r} model "
              f"{printable(wanted[1])!r}: it is sent as written, "
              f"{stand_in_facts(harness.registry, wanted[0])}", file=sys.stderr)
    if start is not None:  # recorded, as pi records them, where the path's differ
        harness.begin_with(projection, start)
    loop = asyncio.get_running_loop()
    stopped_by: signal.Signals | None = None

    def interrupt(by: signal.Signals) -> None:
        nonlocal stopped_by
        stopped_by = by
        harness.abort()  # the run saves what it has as aborted and kills a running command

    harness.subscribe(printer)

    for stop in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(stop, interrupt, stop)
    try:
        produced = await harness.prompt(options.prompt, resumed=True)
    finally:
        for stop in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(stop)
    printer.end_line()
    written = "" if tree.on_disk else " (not written: pi writes a session at its first prompt)"
    # A committed file's name must not forge a line of its own on the terminal.
    write_path_line(sys.stderr, tree.path.replace("\n", "\\n"), "session: ", written)
    last = next((m for m in reversed(produced) if isinstance(m, AssistantMessage)), None)
    if printer.failed is not None:
        return output_failed(printer.failed)
    if stopped_by is not None:
        print("pi-lsp: aborted", file=sys.stderr)
        return EXIT_TERMINATED if stopped_by == signal.SIGTERM else EXIT_INTERRUPTED
    if last is not None and last.stop_reason == "error":
        print(f"pi-lsp: {printable(last.error_message or 'the model call failed')}",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def stand_in_facts(registry: ModelRegistry, provider: str) -> str:
    """How a run counts an id the catalog lacks: with the facts pi 1.6 copies for it."""
    base = registry.stand_in(provider)
    if base is None:
        return f"counted with a {DEFAULT_CONTEXT_WINDOW:,}-token window and no price"
    return f"with the facts of {printable(base.provider)}/{printable(base.id)} (as pi 1.6)"


def fallback_model(harness: Harness, projection: Projection) -> tuple[str, str] | None:
    """The default model, warned of on stderr, when pi 1.6 could not restore the session's
    (lost_model: one its catalog lacks, or whose provider cannot be made); else None."""
    lost = lost_model(projection, harness.registry, harness.provider)
    if lost is None:
        return None
    names, why = lost
    default = harness.default_model
    if unusable := provider_problem(harness.provider, default[0]):
        # pi 1.6 would go on to the first model with a key in its own catalog, in an order
        # pi-lsp's smaller catalog cannot follow: say why neither model can be used instead.
        raise RunError(printable(
            f"could not restore model {'/'.join(names)} ({why}), and the default model "
            f"{'/'.join(default)} cannot be used either ({unusable}); pass --model"))
    print(f"pi-lsp: warning: could not restore model {printable('/'.join(names))}; using "
          f"{printable('/'.join(default))}", file=sys.stderr)
    return default


def output_failed(error: OSError) -> int:
    """Say why the run stopped when stdout failed; the exit code for it."""
    if isinstance(error, BrokenPipeError):
        print("pi-lsp: aborted: the reply's reader stopped reading; the reply so far is saved",
              file=sys.stderr)
        return EXIT_READER_GONE
    print(f"pi-lsp: aborted: cannot write the reply ({error.strerror}); the reply so far is "
          "saved", file=sys.stderr)
    return EXIT_USAGE


def main_run(options: RunOptions) -> int:
    workspace = Path(os.getcwd())
    try:
        trust = decide_without_asking(workspace, options.approve,
                                      lambda note: print(f"pi-lsp: note: {note}",
                                                         file=sys.stderr))
        settings = load_settings(workspace, project=trust.trusted)
        return asyncio.run(run_prompt(options, workspace, settings, trust.vouched))
    except (RunError, MissingApiKeyError, SettingsError, UnknownProviderError,
            ModelsFileError, SessionDirError) as error:
        print(f"pi-lsp: {error}", file=sys.stderr)
        return EXIT_USAGE
