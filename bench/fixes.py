"""Fix benchmark (not a test): on the demo twin, for each finding that offers "Fix", the
server time of its plan page (pre-check read live) and of its run through the engine, the
twin writes the run made, and the same run again once the finding has gone ("nothing to
do": it must write nothing). Also the Health page's SQL queries with every Fix link on it.

Run: .venv/bin/python bench/fixes.py
(uses its own SQLite file under /tmp unless DATABASE_URL is set).
"""

import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ["BRICK_PROCEDURE_VERIFY_TIMEOUT"] = "0"
os.environ["BRICK_PROCEDURE_STEP_PAUSE"] = "0"
os.environ.pop("PROMETHEUS_URL", None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from brickadmin.cluster import scenarios  # noqa: E402
from brickadmin.cluster.models import TwinEvent  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from gpus import manifest as manifest_mod  # noqa: E402
from gpus.models import ProcedureRun  # noqa: E402
from gpus.procedures import engine, service  # noqa: E402
from gpus.view.reading import read_cluster, read_problems  # noqa: E402


def main():
    call_command("migrate", verbosity=0)
    objects, hardware, plugin_configs = scenarios.read("demo")
    twin = TwinGateway()
    twin.load(objects, hardware, plugin_configs)
    # The demo's live replicas (4) in the managed manifest, so the toleration fix's apply changes only that.
    manifest_mod.save_version(manifest_mod.set_replicas(manifest_mod.current().content, 4), actor_name="bench")
    User = get_user_model()
    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_staff": True})
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)

    client.get("/health/")
    with CaptureQueriesContext(connection) as ctx:
        t0 = time.perf_counter()
        client.get("/health/")
        health_ms = (time.perf_counter() - t0) * 1000
    print(f"Health page: {len(ctx.captured_queries)} SQL queries, {health_ms:.1f} ms")

    fixes = [(p.kind, p.subject, p.fix_plan_url) for p in read_problems(read_cluster()) if p.fix_plan_url]
    # The toleration fix applies the manifest, which restarts the plugins: run it last, or the
    # plugin restart finds its finding gone (as it should).
    fixes.sort(key=lambda f: f[0] == "plugin-missing")
    print(f"{'finding':<26} {'subject':<14} {'plan ms':>8} {'run ms':>8} {'writes':>6} {'again ms':>8} {'writes':>6}")
    for kind, subject, url in fixes:
        t0 = time.perf_counter()
        assert client.get(url).status_code == 200
        plan_ms = (time.perf_counter() - t0) * 1000
        path, query = urlsplit(url).path, dict(parse_qsl(urlsplit(url).query))
        resp = client.post(path + "start/", query)
        assert resp.status_code == 302, resp.content[:500]
        run = ProcedureRun.objects.latest("pk")
        writes = TwinEvent.objects.count()
        t0 = time.perf_counter()
        engine.execute(run.pk, twin)
        run_ms = (time.perf_counter() - t0) * 1000
        run_writes = TwinEvent.objects.count() - writes
        run.refresh_from_db()
        again = service.start_run(run.procedure, run.node, run.params, actor_name="bench", dispatch=False)
        writes = TwinEvent.objects.count()
        t0 = time.perf_counter()
        engine.execute(again.pk, twin)
        again_ms = (time.perf_counter() - t0) * 1000
        again.refresh_from_db()
        again_writes = TwinEvent.objects.count() - writes
        print(
            f"{kind:<26} {subject:<14} {plan_ms:>8.1f} {run_ms:>8.1f} {run_writes:>6} {again_ms:>8.1f} "
            f"{again_writes:>6}   {run.message[:30]} / {again.message[:30]}"
        )


if __name__ == "__main__":
    main()
