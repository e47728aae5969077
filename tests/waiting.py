"""Waiting for an outcome that arrives from another thread or process (a watcher, a replica)."""

import time


def wait_until(check, timeout=30.0, what="condition", interval=0.05):
    """Poll ``check`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")
