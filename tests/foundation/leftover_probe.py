"""Not part of the suite (its name is not test_*.py): test_bin_test.py runs it through bin/test.
It leaves a process running in a session of its own, as a careless test or fixture would."""

import os
import subprocess


def test_leaves_a_process_behind():
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    with open(os.environ["BRICK_LEFTOVER_PIDFILE"], "w") as f:
        f.write(str(sleeper.pid))
