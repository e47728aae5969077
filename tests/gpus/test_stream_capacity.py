"""The run page's streams and the database, served by Django's ASGI handler as uvicorn serves
them (each request's sync code in a thread of its own): a waiting stream holds no PostgreSQL
connection, so open pages never fill max_connections; a process keeps a bounded number of
streams open, per user and in all, and refuses the next with Retry-After (429, 503)."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.conf import settings as django_settings
from django.core.asgi import get_asgi_application
from django.db import connection
from django.test import Client
from django.urls import reverse

from gpus.procedures import service
from gpus.run_stream import ADMISSION
from tests.conftest import require_service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.usefixtures("fast_engine")]


@pytest.fixture(autouse=True)
def on_postgresql(monkeypatch):
    """Connections are counted by PostgreSQL: skipped elsewhere locally, a failure in CI. As in
    the web process (brickadmin/asgi.py), a request's connection is closed when it finishes."""
    require_service(connection.vendor == "postgresql", "PostgreSQL (DATABASE_URL)")
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


def backends() -> int:
    """The connections PostgreSQL holds open to the test database (this count's own left out)."""
    s = connection.settings_dict
    with psycopg.connect(
        dbname=s["NAME"],
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        host=s["HOST"] or None,
        port=s["PORT"] or None,
        autocommit=True,
    ) as conn:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        return conn.execute(sql).fetchone()[0]


class Stream:
    """One GET to the ASGI application as a server makes it; the answer read as it comes, the
    browser's leaving told with http.disconnect."""

    def __init__(self, app, path: str, query: str, cookie: str):
        self.messages: asyncio.Queue = asyncio.Queue()
        self.gone = asyncio.Event()
        self.asked = False
        self.body = b""
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"testserver"), (b"cookie", cookie.encode()), (b"accept", b"text/event-stream")],
            "client": ("127.0.0.1", 40000),
            "server": ("testserver", 80),
        }
        self.task = asyncio.get_running_loop().create_task(app(scope, self.receive, self.send))

    async def receive(self):
        if not self.asked:
            self.asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message):
        await self.messages.put(message)

    async def answer(self) -> tuple[int, dict[str, str]]:
        start = await asyncio.wait_for(self.messages.get(), 30)
        assert start["type"] == "http.response.start"
        return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}

    async def read_until(self, text: bytes) -> bytes:
        while text not in self.body:
            message = await asyncio.wait_for(self.messages.get(), 30)
            self.body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        return self.body

    async def close(self):
        self.gone.set()
        await asyncio.wait_for(self.task, 30)


def serve(scenario):
    """Run ``scenario`` in an event loop of its own thread, as a server runs the application:
    under the test's own async_to_sync every request's sync code would share the test's thread."""
    with ThreadPoolExecutor(1) as server:
        return server.submit(asyncio.run, scenario()).result()


def open_run(settings):
    settings.BRICK_RUN_STREAM_SECONDS = 120
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)  # pending: nothing comes
    run.refresh_from_db()
    return reverse("run_stream", args=[run.pk]), f"after={run.last_seq}&status=pending&cancel=0"


def test_the_connections_held_do_not_grow_with_the_streams_waiting(twin, admin_user, settings):
    settings.BRICK_RUN_STREAM_KEEPALIVE_SECONDS = 0.3  # a comment soon: the stream has read and waits
    settings.BRICK_RUN_STREAMS_PER_USER = settings.BRICK_RUN_STREAMS_PER_PROCESS = 50
    path, query = open_run(settings)
    cookie, app = session_cookie(admin_user), get_asgi_application()

    async def scenario():
        async def waiting():
            s = Stream(app, path, query, cookie)
            assert (await s.answer())[0] == 200
            await s.read_until(b": keep-alive")
            return s

        first = [await waiting()]
        with_one = await asyncio.to_thread(backends)
        more = [await waiting() for _ in range(8)]
        with_nine = await asyncio.to_thread(backends)
        for s in first + more:
            await s.close()
        return with_one, with_nine

    with_one, with_nine = serve(scenario)
    assert with_nine <= with_one  # nine waiting streams hold what one did: the process's LISTEN, no more
    assert ADMISSION.open() == 0  # each stream gave its place back when its browser left


def test_streams_beyond_a_users_share_or_the_process_bound_are_refused_with_retry_after(
    twin, admin_user, django_user_model, settings
):
    settings.BRICK_RUN_STREAMS_PER_USER = 2
    settings.BRICK_RUN_STREAMS_PER_PROCESS = 3
    settings.BRICK_RUN_STREAM_RETRY_AFTER_SECONDS = 7
    path, query = open_run(settings)
    other = django_user_model.objects.create_user("root2", password="pw-root2-123", is_staff=True)
    mine, theirs, app = session_cookie(admin_user), session_cookie(other), get_asgi_application()

    async def scenario():
        async def ask(cookie):
            s = Stream(app, path, query, cookie)
            status, headers = await s.answer()
            body = await s.read_until(b"retry:") if status == 200 else await s.read_until(b"\0")
            return s, status, headers, body.decode()

        answers = {}
        a1, a2 = (await ask(mine))[0], (await ask(mine))[0]
        _, answers["mine, third"], headers, body = await ask(mine)
        answers["mine, retry after"], answers["mine, says"] = headers.get("retry-after"), body
        b1, answers["theirs, first"], _, _ = await ask(theirs)
        _, answers["theirs, second"], headers, body = await ask(theirs)
        answers["theirs, retry after"], answers["theirs, says"] = headers.get("retry-after"), body
        await a1.close()  # one of mine ends: its place is mine again
        a3, answers["mine, after one closed"], _, _ = await ask(mine)
        for s in (a2, b1, a3):
            await s.close()
        return answers

    answers = serve(scenario)
    assert answers["mine, third"] == 429 and answers["mine, retry after"] == "7"
    assert "You already follow 2 runs live" in answers["mine, says"]
    assert answers["theirs, first"] == 200  # another admin still gets one: the process has room
    assert answers["theirs, second"] == 503 and answers["theirs, retry after"] == "7"
    assert "This server follows as many runs live as it may" in answers["theirs, says"]
    assert answers["mine, after one closed"] == 200
    assert ADMISSION.open() == 0


@pytest.fixture
def web_process_pool(monkeypatch):
    """The web process's pool of PostgreSQL connections (BRICK_DB_POOL, set by brickadmin/asgi.py),
    here of 3, for every thread's connection; closed after the test."""
    connection.close()
    options = {**connection.settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 3, "timeout": 10}}
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", options)
    yield 3
    connection.close()
    connection.close_pool()


def test_with_the_web_processs_pool_pages_and_streams_borrow_its_connections_and_no_more(
    twin, admin_user, settings, web_process_pool
):
    settings.BRICK_RUN_STREAM_KEEPALIVE_SECONDS = 0.3
    settings.BRICK_RUN_STREAMS_PER_USER = settings.BRICK_RUN_STREAMS_PER_PROCESS = 50
    path, query = open_run(settings)
    page = path.removesuffix("stream/")
    cookie, app = session_cookie(admin_user), get_asgi_application()

    async def scenario():
        async def waiting():
            s = Stream(app, path, query, cookie)
            assert (await s.answer())[0] == 200
            await s.read_until(b": keep-alive")
            return s

        async def load_page():
            s = Stream(app, page, "", cookie)
            assert (await s.answer())[0] == 200
            body = await s.read_until(b"</html>")
            await s.close()
            return body

        # connections earlier tests' threads in this process still hold are not this test's
        before = await asyncio.to_thread(backends)
        streams = [await waiting() for _ in range(6)]
        pages = await asyncio.gather(*(load_page() for _ in range(6)))  # at once, each its own thread
        held = await asyncio.to_thread(backends)
        for s in streams:
            await s.close()
        return pages, held - before

    pages, opened = serve(scenario)
    assert all(b'id="step-rows"' in p and p.rstrip().endswith(b"</html>") for p in pages)  # every page whole
    assert opened <= web_process_pool + 1  # the pool's connections and the process's LISTEN, no more
    assert ADMISSION.open() == 0
