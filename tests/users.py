"""Running a test's step as a user who is not root, who may not read every file."""

from __future__ import annotations

import os
from collections.abc import Callable

NOBODY = 65534


def as_a_user(work: Callable[[], str]) -> str:
    """What `work` returns, run in a child process as a user who is not root (nobody, when this
    is root): its answer, or `failed: <error>`."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only os._exit leaves it, never pytest's own ending
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
            answer = work()
        except BaseException as error:  # handed to the parent, which fails
            answer = f"failed: {error!r}"
        os.write(writing, answer.encode())
        os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as said:
        answer = said.read().decode()
    os.waitpid(pid, 0)
    return answer
