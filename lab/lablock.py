"""One user of the lab at a time: tests that load scenarios or change the lab's cluster take
this lock (an flock on $BRICK_LAB_DIR/tests.lock) for as long as they use it.

    from lablock import lab_lock          # with lab/ on sys.path
    with lab_lock():                      # blocks until the lab is free (default: 30 min)
        ...

Re-entrant within a process (nested lab_lock(), or hold() then lab_lock(), never wait on
themselves). Processes on the same machine share one lab, so parallel test runs (pytest -n,
two engineers, the procedures' lab tests) would otherwise reset each other's scenarios.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

LOCK = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab")) / "tests.lock"

_mutex = threading.RLock()
_fd: int | None = None
_depth = 0


class LabBusy(TimeoutError):
    pass


def acquire(timeout: float = 1800, poll: float = 0.5) -> None:
    """Take the lock (or one more level of it, when this process holds it already)."""
    global _fd, _depth
    with _mutex:
        if _fd is not None:
            _depth += 1
            return
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise LabBusy(
                        f"the lab is still in use by another process after {timeout:.0f}s "
                        f"(pid {LOCK.read_text().strip() or '?'} in {LOCK})"
                    ) from None
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _fd, _depth = fd, 1


def release() -> None:
    global _fd, _depth
    with _mutex:
        if _fd is None:
            return
        _depth -= 1
        if _depth == 0:
            try:
                fcntl.flock(_fd, fcntl.LOCK_UN)
            finally:
                os.close(_fd)
                _fd = None


def hold(timeout: float = 1800) -> None:
    """Take the lock until this process exits."""
    acquire(timeout)


@contextmanager
def lab_lock(timeout: float = 1800, poll: float = 0.5):
    acquire(timeout, poll)
    try:
        yield
    finally:
        release()
