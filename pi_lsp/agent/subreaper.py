"""The watcher a bash command runs under: `python -I -S subreaper.py SHELL COMMAND`, stdin a
socket only pi-lsp holds the other end of. Standard library only, so it starts quickly.

It runs COMMAND with `SHELL -c`: the shell writes its pid (its process group's id) to the socket
before it runs anything, and when it exits the watcher writes its status and waits for pi-lsp's
verdict: RELEASE lets what the command left in the background run on, and the watcher exits
with the status. When the socket closes instead (pi-lsp ended in any way, `kill -9` included,
or aborted the command, or it timed out), before or after the shell exited, it kills every
process the command started, those that left its process group with `setsid` included: on Linux
the watcher is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so such processes stay its
descendants when their parents die. Where that is not available (macOS) it kills the process
group only.
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
RELEASE = b"r"  # pi-lsp's word that the command ended normally
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


def kill_everything(subreaper: bool, group: int) -> None:
    """SIGKILL the shell's process group, then every descendant until none is left, then the
    watcher's own group (itself)."""
    with contextlib.suppress(ProcessLookupError):  # all of the group may have ended
        os.killpg(group, signal.SIGKILL)
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


def shell_status(child: subprocess.Popen[bytes]) -> int:
    """The shell's exit status once it has exited (128 + the signal that killed it)."""
    if not hasattr(os, "waitid"):  # macOS before Python 3.13
        code = child.wait()
        return 128 - code if code < 0 else code
    # Left a zombie until the verdict, the shell keeps its pid and group id: the kill cannot
    # reach another process that took the number meanwhile.
    ended = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    assert ended is not None  # None only with WNOHANG
    return ended.si_status + 128 * (ended.si_code != os.CLD_EXITED)


def report_group(watch: int) -> None:
    """Run in the shell's process before the command: tell pi-lsp the shell's pid, its process
    group's id, so that pi-lsp can kill the group should the watcher die. Told before anything
    runs, it arrives even when the command's first act is `kill -9 $PPID`."""
    os.write(watch, b"%d\n" % os.getpid())


def main() -> int:
    subreaper = become_subreaper()
    watch = os.dup(0)  # not inherited: only this process talks with pi-lsp
    shell, command = sys.argv[1:3]
    # In a session and process group of its own, as pi 1.6 starts it (`setsid sleep 9` then
    # forks, and the shell exits at once).
    child = subprocess.Popen([shell, "-c", command], stdin=subprocess.DEVNULL,
                             start_new_session=True, preexec_fn=lambda: report_group(watch))
    done_read, done_write = os.pipe()
    statuses: list[int] = []

    def wait_for_child() -> None:
        with contextlib.suppress(ChildProcessError):  # reaped by a kill meanwhile
            statuses.append(shell_status(child))
        os.write(done_write, b"x")

    threading.Thread(target=wait_for_child, daemon=True).start()
    ready, _, _ = select.select([watch, done_read], [], [])
    if watch not in ready:
        # The background jobs the shell left may still hold the output; pi-lsp decides.
        with contextlib.suppress(OSError):  # pi-lsp gave up meanwhile: its end is closed
            os.write(watch, b"%d\n" % statuses[0])
            if os.read(watch, 1) == RELEASE:
                child.wait()
                return statuses[0]
    kill_everything(subreaper, child.pid)
    return 0  # not reached: the last kill ends this process too


if __name__ == "__main__":
    sys.exit(main())
