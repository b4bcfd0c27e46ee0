"""The watcher a bash command runs under: `python -I -S subreaper.py SHELL COMMAND`, stdin a pipe
only pi-lsp holds open. Standard library only, so it starts quickly.

It runs COMMAND with `SHELL -c` and exits with its status. When the pipe closes (pi-lsp ended in
any way, `kill -9` included, or aborted the command) it kills every process the command
started, those that left its process group with `setsid` included: on Linux the watcher is a
child subreaper (prctl PR_SET_CHILD_SUBREAPER), so such processes stay its descendants when their
parents die. Where that is not available (macOS) it kills the process group only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
from collections import defaultdict

PR_SET_CHILD_SUBREAPER = 36
MAX_ROUNDS = 1000  # killing a parent hands its children to us; a fork loop ends too


def become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc (zombies left out: they are dead)."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        if fields[0] != b"Z":
            children[int(fields[1])].append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def kill_everything(subreaper: bool) -> None:
    """SIGKILL every descendant until none is left, then the whole process group."""
    if subreaper:
        for _round in range(MAX_ROUNDS):
            found = descendants(os.getpid())
            if not found:
                break
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            reap()
    os.killpg(0, signal.SIGKILL)


def main() -> int:
    subreaper = become_subreaper()
    watch = os.dup(0)  # not inherited: only this process waits on pi-lsp's pipe
    shell, command = sys.argv[1:3]
    child = subprocess.Popen([shell, "-c", command], stdin=subprocess.DEVNULL)
    done_read, done_write = os.pipe()

    def wait_for_child() -> None:
        child.wait()
        os.write(done_write, b"x")

    threading.Thread(target=wait_for_child, daemon=True).start()
    ready, _, _ = select.select([watch, done_read], [], [])
    if watch in ready:
        kill_everything(subreaper)
    code = child.wait()
    return 128 - code if code < 0 else code  # as sh reports a command killed by a signal


if __name__ == "__main__":
    sys.exit(main())
