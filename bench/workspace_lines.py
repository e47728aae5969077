"""The Workspaces-of-the-cluster list in SQL at 10,000 Workspaces, without the pages around it:
one page (50 lines) of workspaces.directory.lines() and its count, sorted by namespace, sorted
by owner (the record's requester, else the owner label: a subquery per namespace) and searched
by owner. 10,000 view lines (gpus.models.ViewWorkspace), every other one with an approved
request. Its own SQLite file under /tmp.

    .venv/bin/python bench/workspace_lines.py [--workspaces 10000]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
_dir = tempfile.mkdtemp(prefix="brick-bench-")
os.environ.update(
    BRICK_VAR_DIR=_dir,
    DATABASE_URL=f"sqlite:///{_dir}/bench.sqlite3",
    DJANGO_SETTINGS_MODULE="brickadmin.settings",
    BRICK_CLUSTER="twin",
)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db.models import F  # noqa: E402

from gpus.models import ViewWorkspace  # noqa: E402
from workspaces import directory  # noqa: E402
from workspaces.models import WorkspaceRequest  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspaces", type=int, default=10000)
    n = ap.parse_args().workspaces
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench-user")
    ViewWorkspace.objects.bulk_create(
        [ViewWorkspace(namespace=f"ws-{i:05d}", owner=f"user{i}", quota=2, generation=1, digest="x") for i in range(n)],
        batch_size=2000,
    )
    WorkspaceRequest.objects.bulk_create(
        [
            WorkspaceRequest(
                name=f"ws-{i:05d}",
                requester=user,
                requester_name=f"user{i}",
                gpu=2,
                cpu=1,
                memory_gib=1,
                storage_gib=1,
                status=WorkspaceRequest.Status.APPROVED,
            )
            for i in range(0, n, 2)
        ],
        batch_size=2000,
    )
    print(f"{n} Workspaces, {n // 2} with a record; one page of 50 lines and the count (SQLite)")
    for label, qs in (
        ("sorted by namespace", directory.lines().order_by("namespace")),
        ("sorted by owner", directory.lines().order_by(F("owner_name").asc(nulls_last=True), "pk")),
        ("searched by owner", directory.lines().filter(owner_name__icontains="user7")),
    ):
        t = time.perf_counter()
        rows, count = list(qs[:50]), qs.count()
        print(f"  {label:<20} {len(rows):>3} lines of {count:>6}  {(time.perf_counter() - t) * 1000:>9.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
