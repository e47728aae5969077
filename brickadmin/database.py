"""A database that went away (restarted, failed over): what it raises, and waiting for it.

After such an error the connection is unusable; waiting means closing it and connecting
again until the server answers. Callers retry work whose transaction was rolled back whole
(a run's step, an approval), never work that may have committed."""

from __future__ import annotations

import time

from django.db import InterfaceError, OperationalError, connection

DATABASE_GONE = (OperationalError, InterfaceError)


def wait_for_database(timeout: float, interval: float = 0.5) -> bool:
    """Poll until the database answers again (a fresh connection each try); False after
    ``timeout`` seconds without an answer."""
    deadline = time.monotonic() + timeout
    while True:
        connection.close()
        try:
            connection.ensure_connection()
            return True
        except DATABASE_GONE:
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
