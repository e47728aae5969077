"""The demo's embedded broker: kombu's filesystem transport, made safe for several processes.

Kombu's own transport creates a message file under its final name and then writes it, and
rewrites an exchange's table in place: a worker that lists the folder between the two reads
an empty or half-written file and dies of a JSONDecodeError ("Unrecoverable error"), which
the demo met after about 21 minutes of wizard runs. Here every file appears whole or not at
all (written beside the queue, then renamed into it: one atomic rename on one filesystem), a
message is claimed by one atomic rename too, and a file that still cannot be read (left by a
machine that lost power) is moved to ``bad/`` with a log line instead of stopping the worker.
``tests/foundation/test_broker_soak.py`` sends thousands of messages through it from several
processes at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import uuid
from pathlib import Path

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)


def write_whole(path: Path, data: bytes, scratch: Path) -> None:
    """``data`` at ``path``, whole or not at all: written under another name in ``scratch``
    (the same filesystem), flushed, then renamed over ``path``."""
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = scratch / f"{uuid.uuid4().hex}.part"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock on a file of its own (``path`` + .lock): table updates one at a time."""
    with open(f"{path}.lock", "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class Channel(filesystem.Channel):
    @property
    def _root(self) -> Path:
        return Path(self.data_folder_in).parent

    @property
    def _scratch(self) -> Path:
        return self._root / "scratch"

    def _put(self, queue, payload, **kwargs):
        # time.time_ns: one clock for every process, so the folder sorts oldest first
        name = f"{time.time_ns() // 1_000_000}_{uuid.uuid4()}.{queue}.msg"
        try:
            write_whole(Path(self.data_folder_out) / name, str_to_bytes(dumps(payload)), self._scratch)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {name!r} to the queue") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        claimed = self._root / "claimed"
        claimed.mkdir(parents=True, exist_ok=True)
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            mine = claimed / name
            try:
                os.rename(os.path.join(self.data_folder_in, name), mine)  # one process wins
            except OSError:
                continue
            try:
                payload = mine.read_bytes()
                message = loads(bytes_to_str(payload))
            except (OSError, ValueError):
                self._set_aside(mine)
                continue
            mine.unlink(missing_ok=True)
            return message
        raise filesystem.Empty()

    def _set_aside(self, path: Path) -> None:
        bad = self._root / "bad"
        bad.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.replace(path, bad / path.name)
        log.error("broker: unreadable message %s moved to %s; the worker carries on", path.name, bad)

    def get_table(self, exchange):
        file = self._exchange_file(exchange)
        try:
            table = json.loads(file.read_bytes() or b"[]")
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise filesystem.ChannelError(f"Cannot read {file}") from exc
        return [filesystem.exchange_queue_t(*q) for q in table]

    def _rewrite_table(self, exchange, change) -> None:
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with locked(file):
            queues = self.get_table(exchange)
            changed = change(queues)
            if changed is not None:
                write_whole(file, str_to_bytes(dumps(changed)), self._scratch)

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._rewrite_table(exchange, lambda queues: None if entry in queues else [entry, *queues])

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        filesystem.virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._rewrite_table(exchange, lambda queues: [q for q in queues if q != entry] if entry in queues else None)


class Transport(filesystem.Transport):
    Channel = Channel
