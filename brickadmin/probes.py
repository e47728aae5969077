"""Kubernetes probes, answered before anything else looks at the request.

The kubelet calls the pod's IP over plain HTTP: the host is not in ALLOWED_HOSTS and the
scheme is not https, so behind SecurityMiddleware and host validation a probe would get
400 or a redirect. This middleware comes first in MIDDLEWARE and answers:

- ``/healthz``: the process serves requests (liveness; no dependency checked, so a database
  outage does not restart every web pod);
- ``/readyz``: the database answers and, when one is configured, the broker too
  (readiness: take the pod out of the Service until they do).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return ""
    except Exception as exc:  # noqa: BLE001  (any failure means not ready)
        return str(exc)[:200]


def _broker() -> str:
    url = getattr(settings, "CELERY_BROKER_URL", "") or ""
    if not url.startswith(("redis://", "rediss://")):
        return ""
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2).ping()
        return ""
    except Exception as exc:  # noqa: BLE001
        return str(exc)[:200]


class ProbeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == "/healthz":
            return HttpResponse("ok", content_type="text/plain")
        if request.path == "/readyz":
            problems = {k: v for k, v in (("database", _database()), ("broker", _broker())) if v}
            for dependency, error in problems.items():  # the why (hosts, ports) for the logs only
                logging.getLogger("brickadmin.probes").warning("not ready: %s: %s", dependency, error)
            # without a login: which dependency failed, never where it lives
            return JsonResponse(
                {"ready": not problems, **{k: "unavailable" for k in problems}}, status=503 if problems else 200
            )
        return self.get_response(request)
