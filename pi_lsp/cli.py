"""`pi-lsp`: the command line over the same functions the server uses."""

from __future__ import annotations

import argparse
import os
import sys
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from pi_lsp.context.build import build_session_context
from pi_lsp.context.convert import convert_to_llm
from pi_lsp.context.preview import preview_context, render_preview
from pi_lsp.session.catalog import followed, list_sessions, session_dirs, tree_title
from pi_lsp.session.check import check_session, repaired_copy
from pi_lsp.session.entries import THINKING_LEVELS, encoder
from pi_lsp.session.fork import fork_session
from pi_lsp.session.journal import NotASessionError, WriteFailedError
from pi_lsp.session.outline import nested_tree, outline_lines
from pi_lsp.session.tree import SessionTree, UnknownEntryError

if TYPE_CHECKING:
    from pi_lsp.settings import Settings

# Commands that summarize or talk to a model import what they need themselves: the readers
# (`context`, `tree`, ...) stay quick to start, which matters when an editor calls them often.

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
UNSAFE = ("Cc", "Zl", "Zp")  # control characters, line and paragraph separators


class CliError(Exception):
    """A problem with what the user asked for; printed as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"pi-lsp: {message}\n")


class _Version(argparse.Action):
    """`--version`, looked up only when asked for (the lookup costs every other command)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("pi-lsp")
        except PackageNotFoundError:
            found = "(not installed)"
        print(f"pi-lsp {found}")
        parser.exit(0)


def open_session(path: str) -> SessionTree:
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a session file")
    try:
        return SessionTree.open(path)
    except NotASessionError as error:
        raise CliError(f"{path}: not a pi session file ({error})") from None
    except OSError as error:
        raise CliError(f"{path}: cannot read ({error.strerror})") from None


def printable(text: str) -> str:
    """`text` for one terminal line: control characters and line breaks spelled as escapes."""
    return "".join(repr(char)[1:-1] if unicodedata.category(char) in UNSAFE else char
                   for char in text)


def write_line(value: object) -> None:
    """One JSON line; the newline is written apart so a large context is not copied again."""
    sys.stdout.buffer.write(encoder.encode(value))
    sys.stdout.buffer.write(b"\n")


def cmd_context(args: argparse.Namespace) -> int:
    tree = open_session(args.file)
    leaves: list[str | None] = list(args.leaf) if args.leaf else [tree.leaf_id]
    for leaf in leaves:
        if args.json:
            context = build_session_context(tree, leaf)
            if args.layer == "llm":
                write_line({"messages": convert_to_llm(context.messages)})
            else:
                write_line(context)
        else:
            print(render_preview(preview_context(tree, leaf, args.layer)))
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    tree = open_session(args.file)
    if args.json:
        write_line(nested_tree(tree))
        return 0
    title = printable(tree_title(tree))
    print(f"{title} — {len(tree.records)} entries, leaf {tree.leaf_id or '(none)'}")
    print("\n".join(outline_lines(tree)))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    tree = open_session(args.file)
    if args.repair:
        if os.path.exists(args.repair):
            raise CliError(f"{args.repair}: already exists; --repair writes a new file")
        repaired = repaired_copy(tree, args.repair)
        for problem in repaired:
            print(f"{args.file}:line {problem.line}: {problem.kind}: {problem.message}")
        print(f"wrote {args.repair}: {len(tree.records)} entries, {len(repaired)} damaged "
              f"line(s) repaired; {args.file} is unchanged")
        return 0
    problems = check_session(tree)
    for problem in problems:
        where = f"line {problem.line}" if problem.line else "file"
        entry = f" [{problem.entry_id}]" if problem.entry_id else ""
        repair = f" (repair: {problem.repair})" if problem.repair else ""
        print(f"{args.file}:{where}: {problem.kind}{entry}: {problem.message}{repair}")
    print(f"{len(tree.records)} entries, {len(problems)} problem(s)")
    return EXIT_PROBLEMS if problems else 0


def cmd_sessions(args: argparse.Namespace) -> int:
    workspace = args.dir or os.getcwd()
    if not os.path.isdir(workspace):
        raise CliError(f"{workspace}: not a directory")
    sessions = list_sessions(followed(session_dirs(workspace), Path(workspace)))
    if args.json:
        write_line({"sessions": sessions})
        return 0
    if not sessions:
        print(f"no sessions for {os.path.abspath(workspace)}")
    for session in sessions:
        print(f"{session.modified}  {session.entry_count:>6} entries  {printable(session.title)}")
        print(f"    {printable(session.path)}")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    tree = open_session(args.file)
    leaf = args.leaf or tree.leaf_id
    if leaf is None:
        raise CliError(f"{args.file}: the session is empty; nothing to fork")
    fork = fork_session(tree, leaf)
    if not fork.on_disk:
        # pi writes a session only from its first reply (#1672); a file with no reply in it
        # would get its header and entries written a second time by pi.
        raise CliError(f"{args.file}: nothing written: the path to {leaf} has no assistant "
                       f"reply, and pi writes a new session only with its first reply; "
                       f"continue there instead (pi-lsp branch {args.file} --to {leaf})")
    print(fork.path)
    return 0


def note(message: str) -> None:
    print(f"pi-lsp: note: {message}", file=sys.stderr)


def workspace_settings(tree: SessionTree, approve: bool | None) -> Settings:
    """Settings of the workspace the session belongs to (its `.pi/sessions/` parent); its own
    `.pi/` files only when it is trusted (`approve` decides once)."""
    from pi_lsp.files.history import workspace_of
    from pi_lsp.settings import SettingsError, load_settings
    from pi_lsp.trust import trusted_without_asking

    root = workspace_of(Path(tree.path), str(Path.cwd()))
    try:
        return load_settings(root, project=trusted_without_asking(root, approve, note))
    except SettingsError as error:
        raise CliError(str(error)) from None


def cmd_compact(args: argparse.Namespace) -> int:
    import asyncio

    from pi_lsp.summarize.compaction import (
        NothingToCompactError,
        compact,
        plan_or_refusal,
        plan_summary,
    )
    from pi_lsp.summarize.summarizer import SummaryError

    tree = open_session(args.file)
    leaf = args.leaf or tree.leaf_id
    if leaf is not None:
        tree.record(leaf)
    settings = workspace_settings(tree, args.approve)
    compaction = settings.compaction
    if args.keep_recent_tokens is not None:
        compaction = msgspec.structs.replace(compaction, keep_recent_tokens=args.keep_recent_tokens)
    if args.plan:
        try:
            write_line(plan_summary(plan_or_refusal(tree.path_to(leaf), compaction)))
        except NothingToCompactError as error:
            write_line(None)  # as the server's dry run answers
            print(f"pi-lsp: compact would refuse: {error}", file=sys.stderr)
            return EXIT_PROBLEMS
        return 0
    from pi_lsp.summarize.select import choose_summarizer

    summarizer = choose_summarizer(settings)
    try:
        result = asyncio.run(compact(tree, leaf, summarizer, compaction, args.instructions))
    except (NothingToCompactError, SummaryError) as error:
        raise CliError(str(error)) from None
    if args.json:
        write_line(result)
    else:
        how = "extractive summary" if summarizer.extractive else "model summary"
        print(f"compacted {result.tokens_before} tokens into entry {result.entry_id} ({how}); "
              f"kept from {result.first_kept_entry_id}")
        print(result.summary)
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    import asyncio

    from pi_lsp.summarize.branch import branch, branch_with_summary
    from pi_lsp.summarize.summarizer import SummaryError

    tree = open_session(args.file)
    tree.record(args.to)
    if args.summarize:
        from pi_lsp.summarize.select import choose_summarizer

        settings = workspace_settings(tree, args.approve)
        summarizer = choose_summarizer(settings)
        model = settings.default_model
        window = settings.registry().get(settings.default_provider, model)
        budget = window.context_window - settings.branch_summary.reserve_tokens
        try:
            outcome = asyncio.run(branch_with_summary(tree, args.to, summarizer, budget,
                                                      args.instructions))
        except SummaryError as error:
            raise CliError(str(error)) from None
    else:
        outcome = branch(tree, args.to)
    if args.json:
        write_line(outcome)
        return 0
    print(f"leaf is now {outcome.leaf_id or '(new root)'}")
    if outcome.summary_entry_id:
        print(f"branch summary {outcome.summary_entry_id}:\n{outcome.summary}")
    if outcome.editor_text is not None:
        print(f"prompt to edit and resend:\n{outcome.editor_text}")
    return 0


def cmd_rewind(args: argparse.Namespace) -> int:
    import asyncio

    from pi_lsp.files.history import RewindError, changes_to, restore_files, target_of, workspace_of
    from pi_lsp.files.snapshots import SnapshotError, store_for
    from pi_lsp.trust import trusted_without_asking

    tree = open_session(args.file)
    root = workspace_of(Path(tree.path), tree.header.cwd)
    store = store_for(root)
    if store.unavailable_reason is not None:
        raise CliError(store.unavailable_reason)
    legacy = store.adopt_legacy(trusted_without_asking(root, args.approve, note))
    if legacy is not None:
        note(legacy)
    try:
        if args.dry_run:
            found = asyncio.run(changes_to(store, target_of(tree, args.to, args.undo)))
            for change in found.files:
                sys.stdout.write(change.diff or f"{change.status}: {change.path}\n")
            for path in found.refused:
                print(f"would be left alone (under .git/ or .pi/, or behind a symlink): {path}",
                      file=sys.stderr)
            print(f"{len(found.files)} file(s) would change", file=sys.stderr)
            return 0
        result = asyncio.run(restore_files(tree, store, args.to, args.undo))
    except (RewindError, SnapshotError) as error:
        raise CliError(str(error)) from None
    for change in result.files:
        print(f"{change.status:9} {change.path}")
    for path in result.skipped:
        print(f"left alone (too large to snapshot): {path}")
    for path in result.refused:
        print(f"left alone (under .git/ or .pi/, or behind a symlink): {path}")
    print(f"restored {len(result.files)} file(s); undo with: pi-lsp rewind {args.file} "
          f"--undo {result.undo_id}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from pi_lsp.agent.headless import RunOptions, main_run

    if args.session and args.new:
        raise CliError("--session and --new cannot be used together")
    return main_run(RunOptions(prompt=args.prompt, session=args.session, new=args.new,
                               model=args.model, thinking=args.thinking, approve=args.approve))


def cmd_serve(args: argparse.Namespace) -> int:
    from pi_lsp.server.server import serve

    serve(args.tcp)
    return 0


def add_trust_options(command: argparse.ArgumentParser) -> None:
    """pi's one-time trust override for commands that load a folder's `.pi/` files."""
    trust = command.add_mutually_exclusive_group()
    trust.add_argument("--approve", dest="approve", action="store_const", const=True,
                       help="trust the folder's .pi/ files for this command")
    trust.add_argument("--no-approve", dest="approve", action="store_const", const=False,
                       help="leave the folder's .pi/ files out for this command")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pi-lsp", description="pi session trees for editors and terminals")
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    context = commands.add_parser("context", help="the context the model receives at a leaf")
    context.add_argument("file")
    context.add_argument("--leaf", action="append", metavar="ID",
                         help="entry id (repeatable; default: the current leaf)")
    context.add_argument("--layer", choices=("agent", "llm"), default="agent")
    context.add_argument("--json", action="store_true")
    context.set_defaults(run=cmd_context)

    tree = commands.add_parser("tree", help="the session tree")
    tree.add_argument("file")
    tree.add_argument("--json", action="store_true")
    tree.set_defaults(run=cmd_tree)

    check = commands.add_parser("check", help="an integrity report (exit 1 on problems)")
    check.add_argument("file")
    check.add_argument("--repair", metavar="OUT",
                       help="write a copy with damaged lines dropped and bad text repaired")
    check.set_defaults(run=cmd_check)

    sessions = commands.add_parser("sessions", help="the sessions of a workspace")
    sessions.add_argument("dir", nargs="?")
    sessions.add_argument("--json", action="store_true")
    sessions.set_defaults(run=cmd_sessions)

    fork = commands.add_parser("fork", help="copy one path into a new session file")
    fork.add_argument("file")
    fork.add_argument("--leaf", metavar="ID")
    fork.set_defaults(run=cmd_fork)

    compact_cmd = commands.add_parser("compact", help="summarize the older part of a branch")
    compact_cmd.add_argument("file")
    compact_cmd.add_argument("--leaf", metavar="ID")
    compact_cmd.add_argument("--keep-recent-tokens", type=int, metavar="N")
    compact_cmd.add_argument("--instructions", metavar="TEXT")
    compact_cmd.add_argument("--plan", action="store_true", help="print the plan; call no model")
    compact_cmd.add_argument("--json", action="store_true")
    add_trust_options(compact_cmd)
    compact_cmd.set_defaults(run=cmd_compact)

    branch_cmd = commands.add_parser("branch", help="move the leaf to an entry (durably)")
    branch_cmd.add_argument("file")
    branch_cmd.add_argument("--to", required=True, metavar="ID")
    branch_cmd.add_argument("--summarize", action="store_true",
                            help="summarize the branch being left under the new position")
    branch_cmd.add_argument("--instructions", metavar="TEXT")
    branch_cmd.add_argument("--json", action="store_true")
    add_trust_options(branch_cmd)
    branch_cmd.set_defaults(run=cmd_branch)

    rewind = commands.add_parser("rewind", help="restore the workspace's files to an entry")
    rewind.add_argument("file")
    target = rewind.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", metavar="ID", help="the entry whose files to restore")
    target.add_argument("--undo", metavar="SNAPSHOT", help="undo a restore (the id it printed)")
    rewind.add_argument("--dry-run", action="store_true", help="print the diff; change nothing")
    add_trust_options(rewind)
    rewind.set_defaults(run=cmd_rewind)

    serve = commands.add_parser("serve", help="the language server (stdio)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead (debugging)")
    serve.add_argument("--stdio", action="store_true",
                       help="stdio, the default (accepted because clients pass it)")
    serve.set_defaults(run=cmd_serve)

    run = commands.add_parser("run", help="run one prompt to completion in this workspace")
    run.add_argument("prompt")
    run.add_argument("--session", metavar="FILE")
    run.add_argument("--new", action="store_true", help="start a new session")
    run.add_argument("--model", metavar="PROVIDER/ID")
    run.add_argument("--thinking", metavar="LEVEL",
                     choices=THINKING_LEVELS)
    add_trust_options(run)
    run.set_defaults(run=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `pi-lsp`: say what it can do
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (CliError, WriteFailedError) as error:
        print(f"pi-lsp: {error}", file=sys.stderr)
    except UnknownEntryError as error:
        print(f"pi-lsp: {args.file}: {error}", file=sys.stderr)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except msgspec.ValidationError as error:
        print(f"pi-lsp: {error}", file=sys.stderr)
    except Exception as error:  # a bug must still not print a traceback at the user
        print(f"pi-lsp: internal error ({type(error).__name__}: {error})", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
