"""`pi-lsp compact`, `branch` and `rewind`: the commands that change a session or its
workspace's files, under the settings and trust of the workspace the session belongs to."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from pi_lsp.cli_common import EXIT_PROBLEMS, CliError, open_session, write_line
from pi_lsp.paths import real_folder, real_path
from pi_lsp.session.catalog import cli_session_dir, session_workspace
from pi_lsp.session.tree import SessionTree
from pi_lsp.visible import printable, printable_lines

if TYPE_CHECKING:
    from pi_lsp.agent.retry import SummaryRetries
    from pi_lsp.settings import Settings

# Why a path is skipped, unless it says otherwise.
SKIPPED = "ignored, unreadable, or too large to snapshot"
UNRECORDED = "a git repository of its own, whose changes are not recorded or restored"


def note(message: str) -> None:
    print(f"pi-lsp: note: {printable(message)}", file=sys.stderr)


def printable_diff(diff: str) -> str:
    """A diff for the terminal, its tabs kept: no file can send it escape sequences."""
    return printable_lines(diff.removesuffix("\n")) + "\n"


def session_root(tree: SessionTree) -> Path:
    """The workspace of a session the command line was given: its `.pi/sessions/` parent, or,
    in the pi CLI's own folder for a directory (`~/.pi/agent/sessions/--<cwd>--/`), that
    directory; else the current directory, as for `run`.

    A header's cwd alone never chooses the folder, nor where a symlinked session file leads
    (the folder is where its link is): a session file is committed data, and a repository's
    could name your home folder for `rewind` to snapshot. Outside those folders,
    a header naming an existing folder other than the current directory is refused."""
    path = Path(tree.path)
    recorded = tree.header.known_cwd()
    # pi records an absolute path; a relative one would point wherever the command runs from.
    named = Path(recorded) if os.path.isabs(recorded) and os.path.isdir(recorded) else None
    if named is not None and real_folder(path) == real_path(cli_session_dir(recorded)):
        return named  # the user's own pi kept it in the folder it names for that directory
    here = Path.cwd()
    root = session_workspace(path, {}, here)
    # A `.pi/sessions/` folder's own workspace stands, whatever its header says (a clone's
    # sessions name the folder they were recorded in, elsewhere).
    if root is not here or named is None or real_path(named) == real_path(here):
        return root
    raise CliError(f"{path} was recorded in {named} (its header's cwd), but this command runs "
                   f"in {here}; a session file does not choose the folder whose files and "
                   f"settings are used: run the command in {named} to use that folder")


def session_settings(tree: SessionTree, approve: bool | None) -> Settings:
    """Settings of the workspace the session belongs to (its `.pi/sessions/` parent); its own
    `.pi/` files only when it is trusted (`approve` decides once)."""
    from pi_lsp.settings import SettingsError, load_settings
    from pi_lsp.trust import decide_without_asking

    root = session_root(tree)
    try:
        return load_settings(root, project=decide_without_asking(root, approve, note).trusted)
    except SettingsError as error:
        raise CliError(str(error)) from None


def shown_retries(source: Literal["compaction", "branchSummary"]) -> SummaryRetries:
    """A summary's retry waits shown as `run` shows a turn's: a `↻` line each on stderr."""
    from pi_lsp.agent.headless import TerminalPrinter
    from pi_lsp.agent.retry import SummaryRetries

    return SummaryRetries(TerminalPrinter(sys.stdout, sys.stderr), source,
                          "manual" if source == "compaction" else None)


def level_at(tree: SessionTree, leaf_id: str | None, settings: Settings) -> str:
    """The thinking level in force at `leaf_id`, as a session continued there thinks: the one
    set on its path, else the default, clamped to its model."""
    from pi_lsp.context.build import settings_at
    from pi_lsp.context.layers import level_in_force

    return level_in_force(settings_at(tree, leaf_id), settings.registry(),
                          settings.initial_model(),
                          settings.resume_thinking_level)


def cmd_compact(args: argparse.Namespace) -> int:
    import asyncio

    from pi_lsp.summarize.compaction import (
        NothingToCompactError,
        compact,
        compaction_plan,
        plan_summary,
    )
    from pi_lsp.summarize.summarizer import SummaryError

    tree = open_session(args.file)
    leaf = args.leaf or tree.leaf_id
    if leaf is not None:
        tree.record(leaf)
    settings = session_settings(tree, args.approve)
    compaction = settings.compaction
    if args.keep_recent_tokens is not None:
        compaction = msgspec.structs.replace(compaction, keep_recent_tokens=args.keep_recent_tokens)
    if args.plan:
        try:
            write_line(plan_summary(compaction_plan(tree, leaf, compaction)))
        except NothingToCompactError as error:
            write_line(None)  # as the server's dry run answers, with the same reason
            print(f"pi-lsp: compact would refuse: {printable(str(error))}", file=sys.stderr)
            return EXIT_PROBLEMS
        return 0
    from pi_lsp.summarize.select import choose_summarizer

    try:
        summarizer = choose_summarizer(settings)
        result = asyncio.run(compact(tree, leaf, summarizer, compaction, args.instructions,
                                     level_at(tree, leaf, settings),
                                     retries=shown_retries("compaction")))
    except (NothingToCompactError, SummaryError) as error:
        raise CliError(str(error)) from None
    if args.json:
        write_line(result)
    else:
        how = "extractive summary" if summarizer.extractive else "model summary"
        print(printable(f"compacted {result.tokens_before} tokens into entry "
                        f"{result.entry_id} ({how}); kept from {result.first_kept_entry_id}"))
        print(printable_lines(result.summary))  # the model's, or the session's own text
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    import asyncio

    from pi_lsp.summarize.branch import (
        BranchRefusedError,
        branch,
        branch_summary_budget,
        branch_with_summary,
    )
    from pi_lsp.summarize.summarizer import SummaryError

    tree = open_session(args.file)
    tree.record(args.to)
    if args.summarize:
        from pi_lsp.summarize.select import choose_summarizer

        settings = session_settings(tree, args.approve)
        budget = branch_summary_budget(tree, settings.registry(),
                                       settings.initial_model(),
                                       settings.branch_summary.reserve_tokens)
        try:
            summarizer = choose_summarizer(settings)
            outcome = asyncio.run(branch_with_summary(
                tree, args.to, summarizer, budget, args.instructions,
                thinking_level=level_at(tree, tree.leaf_id, settings),
                retries=shown_retries("branchSummary")))
        except (SummaryError, BranchRefusedError) as error:
            raise CliError(str(error)) from None
    else:
        outcome = branch(tree, args.to)
    if args.json:
        write_line(outcome)
        return 0
    print(f"leaf is now {printable(outcome.leaf_id or '(new root)')}")
    if outcome.summary_entry_id:  # the summary and the prompt are text of the session's
        print(f"branch summary {printable(outcome.summary_entry_id)}:\n"
              f"{printable_lines(outcome.summary or '')}")
    if outcome.editor_text is not None:
        print(f"prompt to edit and resend:\n{printable_lines(outcome.editor_text)}")
    return 0


def cmd_rewind(args: argparse.Namespace) -> int:
    import asyncio

    from pi_lsp.files.history import RewindError, changes_to, restore_files, target_of
    from pi_lsp.files.snapshots import SnapshotError, store_for
    from pi_lsp.trust import decide_without_asking

    tree = open_session(args.file)
    root = session_root(tree)
    store = store_for(root)
    if store.unavailable_reason is not None:
        raise CliError(store.unavailable_reason)
    legacy = store.adopt_legacy(decide_without_asking(root, args.approve, note).trusted)
    if legacy is not None:
        note(legacy)
    try:
        if args.dry_run:
            found = asyncio.run(changes_to(store, target_of(tree, args.to, args.undo)))
            for change in found.files:  # file names and contents may come from anyone
                sys.stdout.write(printable_diff(change.diff) if change.diff
                                 else f"{change.status}: {printable(change.path)}\n")
            for path in found.skipped:
                print(f"would be left alone ({printable(found.why.get(path, SKIPPED))}): "
                      f"{printable(path)}", file=sys.stderr)
            for path in found.refused:
                print("would be left alone (under .git/ or .pi/, or behind a symlink): "
                      f"{printable(path)}", file=sys.stderr)
            for path in found.unrecorded:
                print(f"{UNRECORDED}: {printable(path)}", file=sys.stderr)
            print(f"{len(found.files)} file(s) in {printable(str(root))} would change",
                  file=sys.stderr)
            return 0
        result = asyncio.run(restore_files(
            tree, store, args.to, args.undo,
            before_changes=lambda undo_id: note(f"restoring; should it not finish, undo with: "
                                                f"pi-lsp rewind {args.file} --undo {undo_id}")))
    except (RewindError, SnapshotError) as error:
        raise CliError(str(error)) from None
    for change in result.files:
        print(f"{change.status:9} {printable(change.path)}")
    for path in result.skipped:
        print(f"left alone ({printable(result.why.get(path, SKIPPED))}): {printable(path)}")
    for path in result.refused:
        print(f"left alone (under .git/ or .pi/, or behind a symlink): {printable(path)}")
    for path in result.unrecorded:
        print(f"{UNRECORDED}: {printable(path)}")
    print(f"restored {len(result.files)} file(s) in {printable(str(root))}; undo with: "
          f"pi-lsp rewind {args.file} --undo {result.undo_id}")
    return 0
