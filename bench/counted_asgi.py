"""The product's ASGI application (brickadmin.asgi) as gunicorn serves it, with every request
a web worker sends to the Kubernetes API server written down, and the page that sent it.

For bench/load.py --cluster lab: gunicorn serves ``counted_asgi:application`` (``--pythonpath
bench``) instead of ``brickadmin.asgi:application``; each API request (every one goes through
the kubernetes client's ``ApiClient.call_api``) appends one JSON line ``[pid, "METHOD /page/",
"VERB", "/api/path"]`` to ``$BRICK_BENCH_API_LOG``. The pages themselves are not changed.
"""

import contextvars
import json
import os

from kubernetes.client import ApiClient

from brickadmin.asgi import application as product

PAGE: contextvars.ContextVar[str] = contextvars.ContextVar("page", default="(no page)")
LOG = os.environ["BRICK_BENCH_API_LOG"]
_call_api = ApiClient.call_api


def call_api(self, method, url, *args, **kwargs):
    path = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
    with open(LOG, "a") as f:  # one short line, appended whole
        f.write(json.dumps([os.getpid(), PAGE.get(), method, "/" + path]) + "\n")
    return _call_api(self, method, url, *args, **kwargs)


ApiClient.call_api = call_api  # type: ignore[method-assign]


async def application(scope, receive, send):
    if scope["type"] != "http":
        return await product(scope, receive, send)
    token = PAGE.set(f"{scope.get('method', '')} {scope.get('path', '')}")
    try:
        return await product(scope, receive, send)
    finally:
        PAGE.reset(token)
