"""`pi-lsp`: the command line over the same functions the server uses."""

from __future__ import annotations

import argparse
import codecs
import errno
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from pi_lsp.cli_common import (
    EXIT_INTERRUPTED,
    EXIT_PROBLEMS,
    EXIT_READER_GONE,
    EXIT_USAGE,
    CliError,
    discard_output,
    escape_stderr,
    open_session,
    write_line,
    write_messages,
    write_path_line,
    write_tree,
)
from pi_lsp.session.appender import WriteFailedError
from pi_lsp.session.entries import THINKING_LEVELS
from pi_lsp.session.records import UnknownEntryError
from pi_lsp.visible import printable

if TYPE_CHECKING:
    from pi_lsp.context.layers import AgentSetup
    from pi_lsp.session.tree import SessionTree

# Each command imports what it needs itself: the readers (`context`, `tree`, ...) stay quick to
# start, which matters when an editor calls them often, and none pays for another's modules.


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
        try:
            print(f"pi-lsp {found}")
        except BrokenPipeError:
            raise  # main's to handle, as for any command's output
        except OSError as error:  # written at once to a device (`> /dev/full`)
            parser.exit(output_failed(error))
        parser.exit(flushed(0))


def given(text: str) -> str:
    """An option's value, refused when empty: leaving the option out is how to get its
    default, so an empty one (an unset shell variable) must not quietly stand for it."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def host_port(text: str) -> str:
    """`--tcp`'s HOST:PORT (HOST may be empty: 127.0.0.1; PORT 0: one the system picks),
    checked before anything starts."""
    _host, colon, port = text.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit()) or not int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT with a port from 0 to "
                                         "65535")
    return text


def cmd_context(args: argparse.Namespace) -> int:
    from pi_lsp.context.build import build_session_context

    tree = open_session(args.file)
    leaves: list[str | None] = list(args.leaf) if args.leaf else [tree.leaf_id]
    if args.json and args.layer == "agent":  # pi's context as it is: nothing to estimate
        for leaf in leaves:
            context = build_session_context(tree, leaf)
            write_messages(msgspec.structs.replace(context, messages=[]), context.messages)
        return 0
    from pi_lsp.context.layers import UnsendableToolError, build_layer
    from pi_lsp.context.preview import render_preview

    agent_at = request_setup(tree, args.approve) if args.layer == "request" else None
    for leaf in leaves:
        try:
            layer = build_layer(tree, leaf, args.layer, agent_at and agent_at(leaf))
        except UnsendableToolError as error:
            raise CliError(f"{args.file}: {error}") from None
        if not args.json:
            print(render_preview(layer))
        elif layer.request is not None:
            from pi_lsp.providers.wire import request_params

            write_line(request_params(layer.request))
        else:  # the model layer
            write_messages({"messages": []}, [row.message for row in layer.rows])
    return 0


def request_setup(tree: SessionTree, approve: bool | None
                  ) -> Callable[[str | None], AgentSetup]:
    """What `pi-lsp run` would add to the session's context at a leaf: its prompt, tools and
    models, on the model `run` would start a path with no message on (start_choice) or fall
    back to (lost_model)."""
    from pi_lsp.agent.prompt import agent_setup
    from pi_lsp.agent.tools import ALL_TOOLS
    from pi_lsp.cli_changes import session_root, session_settings
    from pi_lsp.context.layers import lost_model
    from pi_lsp.context.projection import project_path
    from pi_lsp.context.resume import start_choice
    from pi_lsp.providers.factory import provider_factory
    from pi_lsp.providers.models_file import ModelsFileError

    settings = session_settings(tree, approve)
    agent = agent_setup(session_root(tree), ALL_TOOLS, settings.registry(),
                        settings.initial_model(),
                        settings.resume_thinking_level, settings.project_trusted)
    make = provider_factory(agent.registry, settings.api_key, oauth_login=settings.oauth_login)

    def provider(name: str) -> object:
        # A models.json value that cannot be read (an unset variable, a `!command`) stops `run`,
        # naming it, before any fallback: the preview shows the session's model, which it tried.
        try:
            return make(name)
        except ModelsFileError:
            return None

    def at(leaf: str | None) -> AgentSetup:
        projection = project_path(tree.path_to(leaf))
        start = start_choice(projection, agent.registry, agent.default_model,
                             settings.thinking_level_for, provider)
        if start is not None:  # no message on the path: run starts it as pi does
            return msgspec.structs.replace(agent, run_model=start[0],
                                           run_thinking_level=start[1])
        if lost_model(projection, agent.registry, provider) is None:
            return agent
        return msgspec.structs.replace(agent, run_model=agent.default_model)
    return at


def cmd_tree(args: argparse.Namespace) -> int:
    from pi_lsp.session.catalog import tree_title
    from pi_lsp.session.outline import nested_tree, outline_lines

    tree = open_session(args.file)
    if args.json:
        write_tree(nested_tree(tree))
        return 0
    print(printable(f"{tree_title(tree)} — {len(tree.records)} entries, "
                    f"leaf {tree.leaf_id or '(none)'}"))
    for line in outline_lines(tree):  # one at a time: a large tree is never one string
        print(line)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from pi_lsp.session.check import check_session, repaired_copy
    from pi_lsp.session.journal import problem_count

    tree = open_session(args.file)
    if args.repair:
        if os.path.exists(args.repair):
            raise CliError(f"{args.repair}: already exists; --repair writes a new file")
        written, repaired = repaired_copy(tree, args.repair)
        for problem in repaired:  # a message quotes the session's text
            print(printable(f"{args.file}:line {problem.line}: {problem.kind}: "
                            f"{problem.message}"))
        print(f"wrote {args.repair}: {written} entries, {problem_count(repaired)} damaged "
              f"line(s) repaired; {args.file} is unchanged")
        return 0
    problems = check_session(tree)
    for problem in problems:
        where = f"line {problem.line}" if problem.line else "file"
        entry = f" [{problem.entry_id}]" if problem.entry_id else ""
        repair = f" (repair: {problem.repair})" if problem.repair else ""
        print(printable(f"{args.file}:{where}: {problem.kind}{entry}: {problem.message}"
                        f"{repair}"))
    print(f"{len(tree.records)} entries, {problem_count(problems)} problem(s)")
    return EXIT_PROBLEMS if problems else 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pi_lsp.session.catalog import followed, list_sessions, of_workspaces, session_dirs
    from pi_lsp.trust import resolve_trust

    workspace = args.dir or os.getcwd()
    if not os.path.isdir(workspace):
        raise CliError(f"{workspace}: not a directory")
    folder = Path(workspace)
    vouched = resolve_trust(folder).vouched  # whether the project's own sessionDir counts
    sessions = of_workspaces(list_sessions(followed(session_dirs(workspace, vouched), folder)),
                             [folder], vouched=[folder] if vouched else [])
    if args.json:
        write_line({"sessions": sessions})
        return 0
    if not sessions:
        print(f"no sessions for {os.path.abspath(workspace)}")
    for session in sessions:
        print(f"{printable(session.modified)}  {session.entry_count:>6} entries  "
              f"{printable(session.title)}")
        print(f"    {printable(session.path)}")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    from pi_lsp.session.fork import fork_session, leaf_fork_refusal

    tree = open_session(args.file)
    leaf = args.leaf or tree.leaf_id
    refusal = None if leaf else leaf_fork_refusal(tree)
    if refusal is not None:
        raise CliError(f"{args.file}: {refusal}; name the entry to fork at with --leaf ID")
    if leaf is None:
        raise CliError(f"{args.file}: the session is empty; nothing to fork")
    fork = fork_session(tree, leaf)
    if not fork.on_disk:
        # pi writes a session only from its first user or assistant message (pi 1.6's rule).
        raise CliError(f"{args.file}: nothing written: the path to {leaf} has no user or "
                       f"assistant message, and pi writes a new session only from its first "
                       f"one; continue there instead (pi-lsp branch {args.file} --to {leaf})")
    write_path_line(sys.stdout, fork.path)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from pi_lsp.agent.headless import RunOptions, main_run

    if args.session and args.new:
        raise CliError("--session and --new cannot be used together")
    return main_run(RunOptions(prompt=args.prompt, session=args.session, new=args.new,
                               model=args.model, thinking=args.thinking, approve=args.approve))


def changing(name: str) -> Callable[[argparse.Namespace], int]:
    """The `cli_changes` command `name`, imported when it runs."""
    def run(args: argparse.Namespace) -> int:
        from pi_lsp import cli_changes

        command: Callable[[argparse.Namespace], int] = getattr(cli_changes, name)
        return command(args)
    return run


def cmd_serve(args: argparse.Namespace) -> int:
    from pi_lsp.server.server import serve

    try:
        serve(args.tcp)
    except OSError as error:
        if not args.tcp:
            raise
        # Only the listening socket's making raises (a bind, a lookup): each connection's
        # errors stay in its own task.
        raise CliError(f"--tcp {args.tcp}: cannot listen ({error.strerror or error})") from None
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
    context.add_argument("--leaf", action="append", metavar="ID", type=given,
                         help="entry id (repeatable; default: the current leaf)")
    context.add_argument("--layer", choices=("agent", "llm", "request"), default="agent",
                         help="request: what `pi-lsp run` would send the provider (--json: "
                              "the request body)")
    context.add_argument("--json", action="store_true")
    add_trust_options(context)
    context.set_defaults(run=cmd_context)

    tree = commands.add_parser("tree", help="the session tree")
    tree.add_argument("file")
    tree.add_argument("--json", action="store_true")
    tree.set_defaults(run=cmd_tree)

    check = commands.add_parser("check", help="an integrity report (exit 1 on problems)")
    check.add_argument("file")
    check.add_argument("--repair", metavar="OUT", type=given,
                       help="write a copy with damaged lines dropped and bad text repaired")
    check.set_defaults(run=cmd_check)

    sessions = commands.add_parser("sessions", help="the sessions of a workspace")
    sessions.add_argument("dir", nargs="?")
    sessions.add_argument("--json", action="store_true")
    sessions.set_defaults(run=cmd_sessions)

    fork = commands.add_parser("fork", help="copy one path into a new session file")
    fork.add_argument("file")
    fork.add_argument("--leaf", metavar="ID", type=given)
    fork.set_defaults(run=cmd_fork)

    compact_cmd = commands.add_parser("compact", help="summarize the older part of a branch")
    compact_cmd.add_argument("file")
    compact_cmd.add_argument("--leaf", metavar="ID", type=given)
    compact_cmd.add_argument("--keep-recent-tokens", type=int, metavar="N")
    compact_cmd.add_argument("--instructions", metavar="TEXT")
    compact_cmd.add_argument("--plan", action="store_true", help="print the plan; call no model")
    compact_cmd.add_argument("--json", action="store_true")
    add_trust_options(compact_cmd)
    compact_cmd.set_defaults(run=changing("cmd_compact"))

    branch_cmd = commands.add_parser("branch", help="move the leaf to an entry (durably)")
    branch_cmd.add_argument("file")
    branch_cmd.add_argument("--to", required=True, metavar="ID", type=given)
    branch_cmd.add_argument("--summarize", action="store_true",
                            help="summarize the branch being left under the new position")
    branch_cmd.add_argument("--instructions", metavar="TEXT")
    branch_cmd.add_argument("--json", action="store_true")
    add_trust_options(branch_cmd)
    branch_cmd.set_defaults(run=changing("cmd_branch"))

    rewind = commands.add_parser("rewind", help="restore the workspace's files to an entry")
    rewind.add_argument("file")
    target = rewind.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", metavar="ID", type=given, help="the entry whose files to restore")
    target.add_argument("--undo", metavar="SNAPSHOT", type=given,
                        help="undo a restore (the id it printed)")
    rewind.add_argument("--dry-run", action="store_true", help="print the diff; change nothing")
    add_trust_options(rewind)
    rewind.set_defaults(run=changing("cmd_rewind"))

    serve = commands.add_parser("serve", help="the language server (stdio)")
    serve.add_argument("--tcp", metavar="HOST:PORT", type=host_port,
                       help="listen on TCP instead (debugging)")
    serve.add_argument("--stdio", action="store_true",
                       help="stdio, the default (accepted because clients pass it)")
    serve.set_defaults(run=cmd_serve)

    run = commands.add_parser("run", help="run one prompt to completion in this workspace")
    run.add_argument("prompt", type=given)  # pi 1.6 sends no empty prompt (`pi -p ""`)
    run.add_argument("--session", metavar="FILE", type=given)
    run.add_argument("--new", action="store_true", help="start a new session")
    run.add_argument("--model", metavar="PATTERN[:LEVEL]", type=given,
                     help="a model as pi 1.6 finds one: [PROVIDER/]ID, or a part of one")
    run.add_argument("--thinking", metavar="LEVEL",
                     choices=THINKING_LEVELS)
    add_trust_options(run)
    run.set_defaults(run=cmd_run)
    return parser


def _surrogates_as_replacement(error: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    # As bytes: UTF-8's encoder takes only ASCII text from a handler.
    return "\ufffd".encode() * (error.end - error.start), error.end


def show_lone_surrogates_as_replacement() -> None:
    """A session may hold half an emoji (pi keeps what a model streamed); print it as U+FFFD,
    as a terminal would show it, instead of failing."""
    codecs.register_error("pi-lsp-surrogates", _surrogates_as_replacement)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name == "utf-8":
            stream.reconfigure(errors="pi-lsp-surrogates")


# Write errors that name no file: the output's (a command's own files name theirs).
OUTPUT_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF}


def run_command(argv: Sequence[str] | None) -> int:
    """Parse `argv` and run its command; an expected failure is one line on stderr."""
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
        raise  # main's to handle, as for one at the last flush
    except msgspec.ValidationError as error:
        print(f"pi-lsp: {error}", file=sys.stderr)
    except OSError as error:
        if error.filename is not None:  # one of the command's own files: say which
            print(f"pi-lsp: {printable(str(error.filename))}: {error.strerror}", file=sys.stderr)
        elif error.errno in OUTPUT_ERRORS:
            return output_failed(error)
        else:
            return internal_error(error)
    except Exception as error:  # a bug must still not print a traceback at the user
        return internal_error(error)
    return EXIT_USAGE


def internal_error(error: Exception) -> int:
    print(f"pi-lsp: internal error ({type(error).__name__}: {error})", file=sys.stderr)
    return EXIT_USAGE


def output_failed(error: OSError) -> int:
    discard_output()
    print(f"pi-lsp: cannot write the output ({error.strerror})", file=sys.stderr)
    return EXIT_USAGE


def flushed(code: int) -> int:
    """`code` once the output is flushed here, not at exit (a failure there is exit 120)."""
    try:
        if not sys.stdout.closed:  # `serve` closes it as the editor's stream ends
            sys.stdout.flush()
    except BrokenPipeError:
        discard_output()  # the reader stopped early (`| head`); the command's code stands
    except OSError as error:
        return output_failed(error)
    return code


def hold_closed_streams() -> None:
    """Give a closed stdout (`>&-`) a descriptor that refuses writes, as `cat` fails there, and
    a closed stderr /dev/null: Python leaves each None, and the next file opened takes it."""
    # With None, writing raised AttributeError and `print(file=None)` put errors in stdout.
    for fd, name, flags in ((1, "stdout", os.O_RDONLY), (2, "stderr", os.O_WRONLY)):
        if getattr(sys, name) is not None:
            continue
        held = os.open(os.devnull, flags)  # the lowest free descriptor: `fd`, when 0 is open
        if held != fd:
            os.dup2(held, fd)
            os.close(held)
        # Kept open as the stream for the rest of the process, as Python's own is.
        setattr(sys, name, open(fd, "w", encoding="utf-8", closefd=False))  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    hold_closed_streams()
    show_lone_surrogates_as_replacement()
    escape_stderr()
    try:
        return flushed(run_command(argv))
    except KeyboardInterrupt:
        print("pi-lsp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader, or stderr's too when they share one pipe
        discard_output()
        discard_output(sys.stderr)
        return EXIT_READER_GONE


if __name__ == "__main__":
    sys.exit(main())
