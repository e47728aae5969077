"""The demo's embedded broker survives its load: several processes publish thousands of
messages while a consumer drains the same folder, and every message arrives once, whole; a
message file that is empty or cut short is set aside and the consumer carries on.
(kombu's own filesystem transport, on the same soak, hands the consumer half-written files:
the worker's "Unrecoverable error: JSONDecodeError".)"""

import multiprocessing
import queue as queues
import time
from pathlib import Path

import pytest
from kombu import Connection
from kombu.transport.virtual.base import BrokerState

PRODUCERS = 4
EACH = 750  # 3,000 messages, each with a body of a few kilobytes as a run's task carries


def options(root: Path) -> dict:
    for d in ("queue", "control", "processed"):
        (root / d).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(root / "queue"),
        "data_folder_out": str(root / "queue"),
        "control_folder": str(root / "control"),
        "processed_folder": str(root / "processed"),
        "store_processed": False,
    }


def connection(root: Path, transport: str = "brickadmin.broker:Transport") -> Connection:
    """A connection to a broker in ``root``. Kombu keeps which queues are bound per transport
    class, for the process: each folder gets a class of its own, as each demo has one folder."""
    cls = Connection(transport=transport).get_transport_cls()
    fresh = type(cls.__name__, (cls,), {"state": BrokerState()})
    return Connection("filesystem://", transport=fresh, transport_options=options(root))


def produce(root: str, who: int, transport: str) -> None:
    with connection(Path(root), transport) as conn:
        q = conn.SimpleQueue("runs")
        for i in range(EACH):
            q.put({"who": who, "i": i, "pad": "x" * (1000 + 50 * (i % 40))})
        q.close()


def soak(root: Path, transport: str = "brickadmin.broker:Transport") -> tuple[set, int, list]:
    """(messages received, duplicates, errors) after PRODUCERS processes sent EACH messages each."""
    ctx = multiprocessing.get_context("fork")
    producers = [ctx.Process(target=produce, args=(str(root), n, transport)) for n in range(PRODUCERS)]
    seen: set = set()
    duplicates = 0
    errors: list = []
    with connection(root, transport) as conn:
        q = conn.SimpleQueue("runs")
        for p in producers:
            p.start()
        deadline = time.monotonic() + 240
        while len(seen) < PRODUCERS * EACH and time.monotonic() < deadline:
            try:
                message = q.get(timeout=0.05)
            except queues.Empty:
                continue
            except Exception as exc:  # what stopped the demo's worker
                errors.append(repr(exc))
                continue
            key = (message.payload["who"], message.payload["i"])
            duplicates += key in seen
            seen.add(key)
            message.ack()
        q.close()
    for p in producers:
        p.join(30)
    return seen, duplicates, errors


@pytest.mark.slow
def test_thousands_of_messages_from_several_processes_arrive_once_and_whole(tmp_path):
    seen, duplicates, errors = soak(tmp_path)
    assert errors == []
    assert duplicates == 0
    assert seen == {(w, i) for w in range(PRODUCERS) for i in range(EACH)}
    assert list((tmp_path / "queue").iterdir()) == []  # nothing left behind
    assert not (tmp_path / "bad").exists()


def test_a_message_cut_short_is_set_aside_and_the_next_one_arrives(tmp_path):
    with connection(tmp_path) as conn:
        channel = conn.default_channel
        (tmp_path / "queue" / "0000000000000_cut.runs.msg").write_bytes(b'{"body": "eyJ3aG')  # a power cut mid-write
        (tmp_path / "queue" / "0000000000001_empty.runs.msg").write_bytes(b"")
        channel._put("runs", {"after": "the cut"})
        assert channel._get("runs") == {"after": "the cut"}
    set_aside = sorted(p.name for p in (tmp_path / "bad").iterdir())
    assert set_aside == ["0000000000000_cut.runs.msg", "0000000000001_empty.runs.msg"]


def test_the_demo_uses_the_safe_transport(tmp_path):
    """Without REDIS_URL (the demo), Celery's broker is this transport."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "REDIS_URL": "",
        "BRICK_VAR_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "brickadmin.settings",
    }
    code = "from brickadmin.celery import app; print(type(app.connection_for_write().transport).__module__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "brickadmin.broker"
