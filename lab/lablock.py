"""One user of the lab at a time: tests that load scenarios or change the lab's cluster take
this lock (an flock on $BRICK_LAB_DIR/tests.lock) for as long as they use it.

    from lablock import lab_lock          # with lab/ on sys.path
    with lab_lock():                      # blocks until the lab is free (default: 30 min)
        ...

Processes on the same machine share one lab, so parallel test runs (pytest -n, two
engineers, the procedures' lab tests) would otherwise reset each other's scenarios.
"""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

LOCK = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab")) / "tests.lock"


class LabBusy(TimeoutError):
    pass


@contextmanager
def lab_lock(timeout: float = 1800, poll: float = 0.5):
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LabBusy(f"the lab is still in use by another process after {timeout:.0f}s ({LOCK})")
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
