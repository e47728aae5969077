"""Time stamps at each hop of a step row's way to the browser, for bench/procedures.py
--hops (benchmark tooling, not loaded by the product).

The bench starts the web process and the worker through this module instead of their own
entry points; each then appends ``hop run seq time`` lines to ``$BRICK_STREAM_TRACE.<pid>``:

- worker: ``commit`` when the transaction that wrote a step row has committed (an
  on_commit hook on the row's post_save);
- web (ASGI): ``wake`` when a stream's wait returned, ``fetch0``/``fetch1`` when a stream's
  read of new rows started and ended in its thread (seq: the last row read), ``call`` when
  the event loop asked for that read, ``sent`` when an SSE message (its id: the last row it
  carries) was handed to the server's socket; ``lag`` when the event loop was blocked for
  more than 5 ms (seq: the lag in ms).

Web:    gunicorn --pythonpath bench stream_trace:application -k uvicorn_worker.UvicornWorker
Worker: python bench/stream_trace.py worker <celery worker arguments>
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")

_lock = threading.Lock()
_file = None


def log(hop: str, run: int, seq: int, t: float | None = None) -> None:
    global _file
    with _lock:
        if _file is None:
            _file = open(f"{os.environ['BRICK_STREAM_TRACE']}.{os.getpid()}", "a", buffering=1)
        _file.write(f"{hop} {run} {seq} {time.time() if t is None else t:.6f}\n")


def read(prefix: str) -> list[tuple[str, int, int, float]]:
    rows = []
    for path in Path(prefix).parent.glob(Path(prefix).name + ".*"):
        for line in path.read_text().splitlines():
            hop, run, seq, t = line.split()
            rows.append((hop, int(run), int(seq), float(t)))
    return rows


def trace_worker() -> None:
    import django

    django.setup()
    from django.db import transaction
    from django.db.models.signals import post_save

    from gpus.models import StepRun

    def committed(sender, instance, created, **kwargs):
        if created:
            run, seq = instance.run_id, instance.seq
            transaction.on_commit(lambda: log("commit", run, seq))

    post_save.connect(committed, sender=StepRun, dispatch_uid="bench-stream-trace", weak=False)


ID_LINE = re.compile(rb"^id: (\d+)$", re.M)
STREAM_PATH = re.compile(r"^/runs/(\d+)/stream/$")


def trace_web(app):
    from gpus import run_stream
    from gpus.views import runs

    wait = run_stream.AsyncWaker.wait

    async def traced_wait(self, *args):
        woke = await wait(self, *args)
        log("wake", self.run_id, -1)
        return woke

    run_stream.AsyncWaker.wait = traced_wait

    readers = runs._stream_readers

    def traced_readers(request, run_id, page_state):
        fetch, progress = readers(request, run_id, page_state)

        def traced_fetch(after):
            t0 = time.time()
            chunks, last, finished = fetch(after)
            if last != after:
                log("fetch0", run_id, last, t0)
                log("fetch1", run_id, last)
            return chunks, last, finished

        traced_fetch.run_id = run_id
        return traced_fetch, progress

    runs._stream_readers = traced_readers
    s2a = runs.sync_to_async

    def traced_s2a(fn, *args, **kwargs):
        inner = s2a(fn, *args, **kwargs)
        run_id = getattr(fn, "run_id", None)
        if run_id is None:
            return inner

        async def call(after):
            t0 = time.time()
            result = await inner(after)
            if result[1] != after:
                log("call", run_id, result[1], t0)
            return result

        return call

    runs.sync_to_async = traced_s2a
    lag_probe = {"task": None}

    async def probe():
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(0.002)
            late = (time.monotonic() - t0 - 0.002) * 1000
            if late > 5:
                log("lag", -1, int(late))

    async def traced(scope, receive, send):
        if lag_probe["task"] is None:
            lag_probe["task"] = asyncio.get_running_loop().create_task(probe())
        match = STREAM_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None:
            path = scope.get("path", "").replace(" ", "+")
            log("request:" + path, -1, -1)
            parts = [0]

            async def page_send(message):  # a run page goes out in parts (gpus/views/runs.py)
                await send(message)
                if message["type"] == "http.response.body" and message.get("more_body") and path.startswith("/runs/"):
                    parts[0] += 1
                    log(f"part{parts[0]}:{path}", -1, -1)

            try:
                return await app(scope, receive, page_send)
            finally:
                log("answered:" + scope.get("path", "").replace(" ", "+"), -1, -1)
        run = int(match.group(1))
        log("stream-request", run, -1)

        async def traced_send(message):
            await send(message)
            if message["type"] == "http.response.body":
                for seq in ID_LINE.findall(message.get("body", b"")):
                    log("sent", run, int(seq))

        return await app(scope, receive, traced_send)

    return traced


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    trace_worker()
    from brickadmin.celery import app as celery_app

    celery_app.worker_main(["worker", *sys.argv[2:]])


def __getattr__(name):  # gunicorn's stream_trace:application (the bench's own import reads only the traces)
    if name != "application":
        raise AttributeError(name)
    from brickadmin.asgi import application as django_app

    globals()["application"] = app = trace_web(django_app)
    return app
