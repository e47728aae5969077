"""The run page's live stream: Server-Sent Events fed from the step rows.

Every step row written wakes the streams of its run: on PostgreSQL a NOTIFY sent in the
row's own transaction (delivered only when it commits, so a woken stream always finds the
row), on SQLite a short poll of the run's ``last_seq``. A stream sends each row after the
last sequence number its browser saw (``Last-Event-ID`` on a reconnect, ``?after=`` on the
first connection) and ends when the run has ended and every row has been sent.

Under ASGI (uvicorn workers) a stream is an async iterator: an open page holds no worker
thread, and one LISTEN connection per process wakes them all. Under WSGI (``runserver``,
the tests' live server) it falls back to a sync iterator with its own LISTEN connection.
"""

from __future__ import annotations

import asyncio
import logging
import time

from django.conf import settings
from django.db import connection
from django.db.models.signals import post_save

from brickadmin.forms import ascii_number

logger = logging.getLogger(__name__)

CHANNEL = "brick_run_steps"  # NOTIFY payload: the run's id


def knob(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


# --- what is sent: pure ------------------------------------------------------------


def resume_after(last_event_id: str | None, after: str | None) -> int:
    """The sequence number a stream starts after: the browser's Last-Event-ID (a reconnect)
    wins over the page's ``?after=`` (the first connection); anything else starts at 0."""
    for value in (last_event_id, after):
        number = ascii_number((value or "").strip(), max_digits=None)
        if number is not None:
            return number
    return 0


def sse_message(data: str, *, event: str = "message", id: int | None = None) -> str:
    """One Server-Sent Event: every line of ``data`` on a ``data:`` line of its own."""
    lines = [f"event: {event}"]
    if id is not None:
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in (data.splitlines() or [""]))
    return "\n".join(lines) + "\n\n"


SYNC_KEEP_ALIVE_SECONDS = 2
KEEP_ALIVE = ": keep-alive\n\n"  # a comment: keeps proxies from closing an idle stream
DONE = sse_message("done", event="done")  # the page closes its EventSource on it (sse-close)


def retry_line(ms: int) -> str:
    return f"retry: {ms}\n\n"


# --- the NOTIFY, in the transaction that writes the row -----------------------------


def notify_step_written(sender, instance, created, **kwargs):
    """post_save of a StepRun: runs inside the row's transaction, so PostgreSQL delivers the
    notification when (and only if) the row commits."""
    if created and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(instance.run_id)])


def connect_signals():
    from .models import StepRun

    post_save.connect(notify_step_written, sender=StepRun, dispatch_uid="brick-run-step-notify")


def _conninfo() -> str:
    from psycopg.conninfo import make_conninfo

    s = connection.settings_dict
    params = {
        "dbname": s.get("NAME"),
        "user": s.get("USER"),
        "password": s.get("PASSWORD"),
        "host": s.get("HOST"),
        "port": str(s.get("PORT") or ""),
    }
    options = {
        k: v
        for k, v in (s.get("OPTIONS") or {}).items()
        if isinstance(v, (str, int))
        and k not in ("isolation_level", "server_side_binding", "pool", "assume_role", "prepare_threshold")
    }
    return make_conninfo(**{k: v for k, v in {**params, **options}.items() if v not in (None, "")})


def listens() -> bool:
    return connection.vendor == "postgresql"


# --- sync (WSGI) waiting --------------------------------------------------------------


class SyncWaker:
    """Blocks until the run may have new rows or ``timeout`` passes (a keep-alive is due):
    a LISTEN on PostgreSQL, a short poll of the run's progress on SQLite."""

    def __init__(self, run_id: int, progress):
        self.run_id, self.progress = run_id, progress
        self.conn = None
        if listens():
            import psycopg

            self.conn = psycopg.connect(_conninfo(), autocommit=True)
            self.conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, seen, timeout: float) -> None:
        if self.conn is not None:
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                for n in self.conn.notifies(timeout=left, stop_after=1):
                    if n.payload == str(self.run_id):
                        return
            return
        poll = knob("BRICK_RUN_STREAM_POLL_MS", 50) / 1000
        deadline = time.monotonic() + timeout
        # Look before the first sleep: a row committed while the last batch was read and sent
        # (a step's events come in bursts) goes out now, not a poll later.
        while self.progress() == seen and time.monotonic() < deadline:
            time.sleep(poll)

    def close(self):
        if self.conn is not None:
            self.conn.close()


# --- async (ASGI) waiting: one LISTEN per process ------------------------------------


class Listener:
    """One LISTEN connection per event loop, waking the streams of the run a NOTIFY names.
    When it cannot listen, streams still wake on their keep-alive timeout (a slow poll)."""

    def __init__(self):
        self.waiters: dict[int, set[asyncio.Event]] = {}
        self.task: asyncio.Task | None = None
        self.listening = asyncio.Event()  # set once LISTEN is in force: no NOTIFY after it is missed

    def subscribe(self, run_id: int) -> asyncio.Event:
        event = asyncio.Event()
        self.waiters.setdefault(run_id, set()).add(event)
        if self.task is None or self.task.done():
            self.listening.clear()
            self.task = asyncio.get_running_loop().create_task(self._listen(_conninfo()))
        return event

    def unsubscribe(self, run_id: int, event: asyncio.Event) -> None:
        events = self.waiters.get(run_id, set())
        events.discard(event)
        if not events:
            self.waiters.pop(run_id, None)

    async def _listen(self, conninfo: str):
        import psycopg

        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                self.listening.set()
                async for n in conn.notifies():
                    if n.payload.isdigit():
                        for event in self.waiters.get(int(n.payload), ()):
                            event.set()
        except Exception:  # the streams fall back to their keep-alive wake-ups; the next subscriber retries
            logger.warning("run stream listener stopped", exc_info=True)


_listeners: dict[int, Listener] = {}


def listener() -> Listener:
    loop = asyncio.get_running_loop()
    return _listeners.setdefault(id(loop), Listener())


class AsyncWaker:
    def __init__(self, run_id: int, progress):
        self.run_id, self.progress = run_id, progress
        self.event = listener().subscribe(run_id) if listens() else None

    async def start(self) -> None:
        """Returns once the process's LISTEN is in force (or after 2 s: then the keep-alive
        wake-ups stand in), so a row committed after the stream's first read wakes it."""
        if self.event is not None:
            try:
                await asyncio.wait_for(listener().listening.wait(), 2)
            except TimeoutError:
                pass

    async def wait(self, seen, timeout: float) -> None:
        if self.event is not None:
            try:
                await asyncio.wait_for(self.event.wait(), timeout)
            except TimeoutError:
                pass
            self.event.clear()
            return
        poll = knob("BRICK_RUN_STREAM_POLL_MS", 50) / 1000
        deadline = time.monotonic() + timeout
        while await self.progress() == seen and time.monotonic() < deadline:  # look first, as above
            await asyncio.sleep(poll)

    def close(self):
        if self.event is not None:
            listener().unsubscribe(self.run_id, self.event)


# --- the streams ------------------------------------------------------------------------


def sync_stream(run_id: int, after: int, fetch, progress):
    """``fetch(after)`` -> (chunks, last seq sent, finished); ``progress()`` -> a value that
    changes when the run records anything. Ends after the run's last row, or after
    BRICK_RUN_STREAM_SECONDS (the browser reconnects with Last-Event-ID)."""
    yield retry_line(int(knob("BRICK_RUN_STREAM_RETRY_MS", 1000)))
    waker = SyncWaker(run_id, progress)
    try:
        until = time.monotonic() + knob("BRICK_RUN_STREAM_SECONDS", 300)
        # A sync server learns that the browser left only when a write fails: write often, so
        # the thread and its database connections are let go within seconds.
        keep_alive = min(knob("BRICK_RUN_STREAM_KEEPALIVE_SECONDS", 15), SYNC_KEEP_ALIVE_SECONDS)
        while True:
            seen = progress()
            chunks, after, finished = fetch(after)
            yield from chunks
            if finished:
                yield DONE
                return
            if time.monotonic() >= until:
                return
            waker.wait(seen, keep_alive)
            yield KEEP_ALIVE
    finally:
        waker.close()


async def async_stream(run_id: int, after: int, fetch, progress):
    """The same stream for ASGI: ``fetch`` and ``progress`` are coroutines."""
    yield retry_line(int(knob("BRICK_RUN_STREAM_RETRY_MS", 1000)))
    waker = AsyncWaker(run_id, progress)
    try:
        await waker.start()
        until = time.monotonic() + knob("BRICK_RUN_STREAM_SECONDS", 300)
        keep_alive = knob("BRICK_RUN_STREAM_KEEPALIVE_SECONDS", 15)
        while True:
            seen = await progress()
            chunks, after, finished = await fetch(after)
            for chunk in chunks:
                yield chunk
            if finished:
                yield DONE
                return
            if time.monotonic() >= until:
                return
            await waker.wait(seen, keep_alive)
            yield KEEP_ALIVE
    finally:
        waker.close()
