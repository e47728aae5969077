"""The run page's live stream: Server-Sent Events fed from the step rows.

Every step row written wakes the streams of its run: on PostgreSQL a NOTIFY sent in the
row's own transaction (delivered only when it commits, so a woken stream always finds the
row), on SQLite the file's ``data_version`` (changed by every commit of another connection)
looked at every few milliseconds. A stream sends each row after the last sequence number its
browser saw (``Last-Event-ID`` on a reconnect, ``?after=`` on the first connection) and ends
when the run has ended and every row has been sent.

Under ASGI (uvicorn workers) a stream is an async iterator: an open page holds no worker
thread, and one watcher per process (a LISTEN connection, or the SQLite file's version)
wakes them all; a woken stream reads and renders its new rows in one trip to its thread.
Under WSGI (``runserver``, the tests' live server) it falls back to a sync iterator with its
own LISTEN connection (on SQLite, its own look at the file's version).

A waiting stream holds no database connection: each read closes its thread's connection
when it is done (``released``), at most BRICK_RUN_STREAM_READS reads of a process run at
once (``read_gate``), and a keep-alive reads nothing while the process's watcher has been
listening since the stream's last read. A process admits BRICK_RUN_STREAMS_PER_PROCESS open
streams, BRICK_RUN_STREAMS_PER_USER of them one user's (``admit``); the next is refused
with Retry-After, and the page follows the run by polling until a stream is admitted again.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.db.models.signals import post_save
from django.utils.translation import gettext as _

from brickadmin.forms import ascii_number

logger = logging.getLogger(__name__)

CHANNEL = "brick_run_steps"  # NOTIFY payload: the run's id


def knob(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


# --- what is sent: pure ------------------------------------------------------------


def resume_after(last_event_id: str | None, after: str | None) -> int:
    """The sequence number a stream starts after: the browser's Last-Event-ID (a reconnect)
    wins over the page's ``?after=`` (the first connection); anything else starts at 0, a
    number of more digits than a sequence number has too (int() refuses over 4,300 of them)."""
    for value in (last_event_id, after):
        number = ascii_number((value or "").strip())
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


# --- how many streams a process keeps open ---------------------------------------------


class Refused(Exception):
    """A stream not admitted: its HTTP status (429: the user's bound; 503: the process's),
    the seconds after which to try again and a sentence saying why."""

    def __init__(self, status: int, retry_after: int, reason: str):
        super().__init__(reason)
        self.status, self.retry_after, self.reason = status, retry_after, reason


class Ticket:
    """One admitted stream. It counts while it lives: released when its stream ends, or, for
    a stream never started (the browser left before its first byte), when it is collected."""

    __slots__ = ("__weakref__", "admission", "user")

    def __init__(self, admission: Admission, user: Any):
        self.admission, self.user = admission, user

    def release(self) -> None:
        self.admission.release(self)


class Admission:
    """The open streams of this process, per user. The views take a ticket in their thread,
    the streams give it back in the event loop's: a lock guards the count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_user: dict[Any, weakref.WeakSet[Ticket]] = {}

    def open(self, user: Any = None) -> int:
        with self.lock:
            if user is not None:
                return len(self.by_user.get(user, ()))
            return sum(len(tickets) for tickets in self.by_user.values())

    def admit(self, user: Any, per_user: int, per_process: int, retry_after: int) -> Ticket:
        with self.lock:
            mine = self.by_user.setdefault(user, weakref.WeakSet())
            if len(mine) >= per_user:
                raise Refused(
                    429,
                    retry_after,
                    _("You already follow %(n)d runs live; this page updates every few seconds instead.")
                    % {"n": len(mine)},
                )
            if sum(len(tickets) for tickets in self.by_user.values()) >= per_process:
                raise Refused(
                    503,
                    retry_after,
                    _("This server follows as many runs live as it may; this page updates every few seconds instead."),
                )
            ticket = Ticket(self, user)
            mine.add(ticket)
            return ticket

    def release(self, ticket: Ticket) -> None:
        with self.lock:
            mine = self.by_user.get(ticket.user)
            if mine is not None:
                mine.discard(ticket)
                if not mine:
                    del self.by_user[ticket.user]


ADMISSION = Admission()


def admit(user: Any) -> Ticket:
    """A ticket for one more open stream of ``user`` in this process, or Refused."""
    return ADMISSION.admit(
        user,
        per_user=settings.BRICK_RUN_STREAMS_PER_USER,
        per_process=settings.BRICK_RUN_STREAMS_PER_PROCESS,
        retry_after=settings.BRICK_RUN_STREAM_RETRY_AFTER_SECONDS,
    )


# --- a read holds a database connection only while it reads ----------------------------


def release_connection() -> None:
    """Close this thread's database connection (the next query opens one). Not inside a
    transaction: that is someone else's (a test's), and closing it would end it."""
    if not connection.in_atomic_block:
        connection.close()


def released(read: Callable[..., Any]) -> Callable[..., Any]:
    """``read`` followed by closing its thread's connection, whatever it raised: a stream
    waits with none, so open pages never fill PostgreSQL's max_connections."""

    @functools.wraps(read)
    def call(*args: Any) -> Any:
        try:
            return read(*args)
        finally:
            release_connection()

    return call


_read_gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its Semaphore


def read_gate() -> asyncio.Semaphore:
    """The reads of this process's streams, BRICK_RUN_STREAM_READS at once: a NOTIFY waking
    hundreds of streams opens that many connections, not hundreds."""
    loop = asyncio.get_running_loop()
    if loop not in _read_gates:
        _read_gates[loop] = asyncio.Semaphore(max(1, settings.BRICK_RUN_STREAM_READS))
    return _read_gates[loop]


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


# --- SQLite: a commit by any other connection changes the file's data_version -------------


def sqlite_path() -> str | None:
    """The database file a separate connection can watch (None: in memory, nothing to watch)."""
    name = str(connection.settings_dict.get("NAME") or "")
    if connection.vendor != "sqlite" or not name or name == ":memory:" or name.startswith("file:"):
        return None
    return name


class DataVersion:
    """``PRAGMA data_version`` on a connection of its own: it changes when another connection
    commits (the worker writing a step row). Reading it touches no table and takes about 10 µs,
    so it can be asked every few milliseconds where a query of the run, per open page, could not."""

    def __init__(self, path: str):
        import sqlite3

        # A short timeout: a busy file answers "maybe changed" rather than keep the caller waiting.
        self.conn = sqlite3.connect(path, timeout=0.05, isolation_level=None, check_same_thread=False)
        self.last = self._read()

    def _read(self):
        try:
            return self.conn.execute("PRAGMA data_version").fetchone()[0]
        except Exception:  # locked, or gone: treated as a change; the stream's own read decides
            return None

    def changed(self) -> bool:
        now = self._read()
        changed = now is None or now != self.last
        self.last = now
        return changed

    def close(self):
        self.conn.close()


def poll_seconds() -> float:
    return knob("BRICK_RUN_STREAM_POLL_MS", 10) / 1000


# --- sync (WSGI) waiting --------------------------------------------------------------


class SyncWaker:
    """Blocks until the run may have new rows or ``timeout`` passes (a keep-alive is due):
    a LISTEN on PostgreSQL; on SQLite the file's data_version, looked at every
    BRICK_RUN_STREAM_POLL_MS, then the run's progress when it changed."""

    def __init__(self, run_id: int, progress):
        self.run_id, self.progress = run_id, progress
        self.conn = self.version = None
        if listens():
            import psycopg

            self.conn = psycopg.connect(_conninfo(), autocommit=True)
            self.conn.execute(f"LISTEN {CHANNEL}")
        elif (path := sqlite_path()) is not None:
            self.version = DataVersion(path)

    def wait(self, seen, timeout: float) -> None:
        if self.conn is not None:
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                for n in self.conn.notifies(timeout=left, stop_after=1):
                    if n.payload == str(self.run_id):
                        return
            return
        poll = poll_seconds()
        deadline = time.monotonic() + timeout
        # Look before the first sleep: a row committed while the last batch was read and sent
        # (a step's events come in bursts) goes out now, not a poll later.
        while time.monotonic() < deadline:
            if (self.version is None or self.version.changed()) and self.progress() != seen:
                return
            time.sleep(poll if self.version is not None else max(poll, 0.05))

    def close(self):
        if self.conn is not None:
            self.conn.close()
        if self.version is not None:
            self.version.close()


# --- async (ASGI) waiting: one watcher per process -----------------------------------


class Watcher:
    """Wakes the streams of a process when their run may have new rows: one watcher per event
    loop, whatever the number of open pages. ``ready`` is set once a commit made from then on
    is sure to wake them (a stream that started before looks once more)."""

    def __init__(self):
        self.waiters: dict[int, set[asyncio.Event]] = {}
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.epoch = 0  # counts the times it started listening: a stream knows whether it missed a gap

    def subscribe(self, run_id: int) -> asyncio.Event:
        event = asyncio.Event()
        self.waiters.setdefault(run_id, set()).add(event)
        self.keep_running()
        return event

    def keep_running(self) -> None:
        """Start (again) when not running: after a failure, the next stream to wait restarts it."""
        if self.task is None or self.task.done():
            self.ready.clear()
            self.task = asyncio.get_running_loop().create_task(self.run())

    def listening(self) -> int | None:
        """The current listening session's number while every commit wakes its streams; None
        while it starts or after it stopped."""
        running = self.task is not None and not self.task.done() and self.ready.is_set()
        return self.epoch if running else None

    def listens_now(self) -> None:
        self.epoch += 1
        self.ready.set()

    def unsubscribe(self, run_id: int, event: asyncio.Event) -> None:
        events = self.waiters.get(run_id, set())
        events.discard(event)
        if not events:
            self.waiters.pop(run_id, None)

    def wake(self, run_id: int | None = None) -> None:
        """The streams of ``run_id`` (None: every stream)."""
        groups = self.waiters.values() if run_id is None else [self.waiters.get(run_id, ())]
        for events in groups:
            for event in events:
                event.set()

    async def run(self):
        raise NotImplementedError


class Listener(Watcher):
    """PostgreSQL: one LISTEN connection, waking the streams of the run a NOTIFY names. When it
    cannot listen, streams still wake on their keep-alive timeout (a slow poll)."""

    async def run(self):
        import psycopg

        try:
            async with await psycopg.AsyncConnection.connect(_conninfo(), autocommit=True) as conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                self.listens_now()
                async for n in conn.notifies():
                    if n.payload.isdigit():
                        self.wake(int(n.payload))
        except Exception:  # the streams fall back to their keep-alive wake-ups; the next subscriber retries
            self.ready.set()
            logger.warning("run stream listener stopped", exc_info=True)


class VersionWatcher(Watcher):
    """SQLite: the file's data_version, every BRICK_RUN_STREAM_POLL_MS while a stream is open;
    any commit wakes every stream (each then reads its run: one query when nothing is new)."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    async def run(self):
        version = DataVersion(self.path)
        self.listens_now()
        try:
            while self.waiters:
                await asyncio.sleep(poll_seconds())
                if version.changed():
                    self.wake()
        finally:
            version.close()


_watchers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its Watcher (or None)


def watcher() -> Watcher | None:
    loop = asyncio.get_running_loop()
    if loop not in _watchers:
        if listens():
            _watchers[loop] = Listener()
        elif (path := sqlite_path()) is not None:
            _watchers[loop] = VersionWatcher(path)
        else:
            _watchers[loop] = None
    return _watchers[loop]


class AsyncWaker:
    def __init__(self, run_id: int):
        self.run_id, self.watcher = run_id, watcher()
        self.event = self.watcher.subscribe(run_id) if self.watcher is not None else None

    def ready(self) -> bool:
        return self.watcher is None or self.watcher.ready.is_set()

    async def start(self) -> None:
        """Returns once a commit from now on wakes this stream (or after 2 s: then the
        keep-alive wake-ups stand in)."""
        if self.watcher is not None:
            try:
                await asyncio.wait_for(self.watcher.ready.wait(), 2)
            except TimeoutError:
                pass

    def arm(self) -> int | None:
        """Before a read: a commit from here on wakes the next wait. Returns the watcher's
        listening session (None: not listening, so a keep-alive reads again)."""
        if self.event is None:
            return None
        self.event.clear()
        return self.watcher.listening()

    def heard_all_since(self, session: int | None) -> bool:
        """Whether every commit since the read that returned ``session`` woke this stream:
        the watcher has listened all along. When not, it is started again if it stopped."""
        if self.watcher is None:
            return False
        self.watcher.keep_running()
        return session is not None and self.watcher.listening() == session

    async def wait(self, timeout: float) -> bool:
        """False when ``timeout`` passed with nothing committed (a keep-alive is due)."""
        if self.event is None:  # no watcher: look again after a poll
            await asyncio.sleep(max(poll_seconds(), 0.05))
            return True
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def close(self):
        if self.event is not None:
            self.watcher.unsubscribe(self.run_id, self.event)


# --- the streams ------------------------------------------------------------------------


def sync_stream(run_id: int, after: int, fetch, progress, ticket: Ticket | None = None):
    """``fetch(after)`` -> (chunks, last seq sent, finished); ``progress()`` -> a value that
    changes when the run records anything. Ends after the run's last row, or after
    BRICK_RUN_STREAM_SECONDS (the browser reconnects with Last-Event-ID); then ``ticket``
    (its place among the process's open streams) is given back."""
    try:
        yield retry_line(int(knob("BRICK_RUN_STREAM_RETRY_MS", 1000)))
        yield from _sync_rows(run_id, after, fetch, progress)
    finally:
        if ticket is not None:
            ticket.release()


def _sync_rows(run_id: int, after: int, fetch, progress):
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


async def async_stream(run_id: int, after: int, fetch, ticket: Ticket | None = None, first=None):
    """The same stream for ASGI: ``fetch`` is a coroutine, run on each wake-up of the
    process's watcher (it reads only the run's row when nothing is new), BRICK_RUN_STREAM_READS
    reads of the process at once. The first read does not wait for the watcher to start; once
    it has, the stream looks once more. A keep-alive reads again only when the watcher may
    have missed a commit (it was not listening all along). ``ticket`` is given back at the end.
    ``first``: what the view read already (fetch's answer), sent before anything else."""
    try:
        retry = retry_line(int(knob("BRICK_RUN_STREAM_RETRY_MS", 1000)))
        if first is not None:  # one write: the retry line and the rows already read
            chunks, after, finished = first
            yield retry + "".join(chunks) + (DONE if finished else "")
            if finished:
                return
        else:
            yield retry
        # What the view and its middleware opened is let go at once, not after waiting its turn to read.
        await sync_to_async(release_connection)()
        waker = AsyncWaker(run_id)
        try:
            async for chunk in _async_rows(waker, after, fetch):
                yield chunk
        finally:
            waker.close()
    finally:
        if ticket is not None:
            ticket.release()


async def _async_rows(waker: AsyncWaker, after: int, fetch):
    until = time.monotonic() + knob("BRICK_RUN_STREAM_SECONDS", 300)
    keep_alive = knob("BRICK_RUN_STREAM_KEEPALIVE_SECONDS", 15)
    while True:
        ready = waker.ready()
        session = waker.arm()
        async with read_gate():
            chunks, after, finished = await fetch(after)
        for chunk in chunks:
            yield chunk
        if finished:
            yield DONE
            return
        if time.monotonic() >= until:
            return
        if not ready:
            await waker.start()
            continue  # a row committed before the watcher started woke nothing: look again
        while not await waker.wait(keep_alive):
            yield KEEP_ALIVE
            if time.monotonic() >= until or not waker.heard_all_since(session):
                break
