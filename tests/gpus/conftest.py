"""Fixtures for the procedure tests.

The worker and browser tests share the database with other processes (a Celery worker,
the live server's threads), so with SQLite the test database is a file, not memory.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests import scenario_copies
from tests.conftest import require_service

REPO = Path(__file__).resolve().parents[2]

_db = settings.DATABASES["default"]
if _db["ENGINE"].endswith("sqlite3"):
    _test = _db.setdefault("TEST", {})
    if not _test.get("NAME"):
        _test["NAME"] = str(Path(settings.VAR_DIR) / f"test-gpus-{os.getpid()}.sqlite3")


@pytest.fixture
def demo(load_scenario):
    return load_scenario("demo")


@pytest.fixture
def fast_engine(monkeypatch):
    """No real waiting in tests: tiny backoff, no verify polling."""
    monkeypatch.setenv("BRICK_PROCEDURE_RETRY_BACKOFF", "0.01")
    monkeypatch.setenv("BRICK_PROCEDURE_VERIFY_TIMEOUT", "0")
    monkeypatch.setenv("BRICK_PROCEDURE_STEP_PAUSE", "0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis_ping(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except Exception:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """REDIS_URL when set, else a redis-server of our own on a free port."""

    url = os.environ.get("REDIS_URL")
    if url:
        url = own_database(url)
        if not _redis_ping(url):
            _require(False, f"Redis at REDIS_URL ({url})")
        yield url
        return
    binary = shutil.which("redis-server")
    _require(bool(binary), "redis-server")
    port = free_port()
    d = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(d)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        if _redis_ping(url):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        _require(False, "redis-server (did not start)")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def own_database(url: str) -> str:
    """REDIS_URL with a database number of this test process's own when tests run in parallel
    (pytest-xdist's gw0, gw1, ...): a Celery worker started by one process must never take
    a task another process published for its own worker and its own test database."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    number = 1 + int(worker[2:]) % 15  # Redis has databases 0-15; 0 is left to serial runs
    scheme, _, rest = url.partition("://")
    address = rest.split("/", 1)[0]
    return f"{scheme}://{address}/{number}"


def _require(ok, what):
    require_service(ok, what)


def database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    if "postgresql" in s["ENGINE"]:
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "") + "@" if s.get("USER") else ""
        return f"postgres://{auth}{s.get('HOST') or 'localhost'}:{s.get('PORT') or 5432}/{s['NAME']}"
    raise RuntimeError("unsupported database for the worker tests")


class Worker:
    """A real `celery -A brickadmin worker` subprocess on the test database and broker."""

    def __init__(self, broker_url, env_extra=None, pool="solo"):
        self.broker_url = broker_url
        self.env_extra = env_extra or {}
        self.pool = pool  # prefork: as deployed (the consumer stays responsive while a task runs)
        self.proc = None
        self.log = None

    def start(self):
        from django.db import connection

        if connection.vendor == "sqlite" and "memory" in str(connection.settings_dict["NAME"]):
            _require(False, "a file-based test database for the worker")
        env = {
            **os.environ,
            "REDIS_URL": self.broker_url,
            "DATABASE_URL": database_url(),
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "PYTHONUNBUFFERED": "1",
            **self.env_extra,
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log = open(Path(settings.VAR_DIR) / f"test-worker-{os.getpid()}.log", "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "brickadmin",
                "worker",
                f"--pool={self.pool}",
                "--concurrency=1",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
                "-n",
                f"test{free_port()}@%h",
            ],
            cwd=REPO,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=20)

    def stop(self):
        self.kill(signal.SIGTERM)
        if self.log:
            self.log.close()


@pytest.fixture
def celery_broker(redis_url):
    """Point this process's Celery app at the test broker (tasks are published here)."""
    from brickadmin.celery import app

    old = app.conf.broker_url, app.conf.broker_transport, app.conf.broker_transport_options
    app.conf.broker_url = redis_url
    # Set up without REDIS_URL, this process names the embedded broker's transport: the worker's instead.
    app.conf.broker_transport, app.conf.broker_transport_options = None, {"visibility_timeout": 3600}
    app._pool = None
    app.amqp._producer_pool = None
    yield redis_url
    app.conf.broker_url, app.conf.broker_transport, app.conf.broker_transport_options = old
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def worker_factory(celery_broker):
    started = []

    def _start(**env):
        w = Worker(celery_broker, {k: str(v) for k, v in env.items()}).start()
        started.append(w)
        return w

    yield _start
    for w in started:
        w.stop()


def wait_for(predicate, timeout=60, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def load_into_twin(name):
    return scenario_copies.load(name)


def pytest_sessionfinish(session, exitstatus):
    """Django deletes the SQLite test file; remove the WAL side files it leaves."""
    for p in Path(settings.VAR_DIR).glob(f"test-gpus-{os.getpid()}.sqlite3*"):
        if p.name.endswith(("-wal", "-shm")) and not p.with_name(p.name[:-4]).exists():
            p.unlink(missing_ok=True)
