"""A page reads one generation of the cluster view, never a mix: the watcher may publish the
next one while a page reads, in another connection, and the page still shows the numbers of
one generation whole (gpus.view.stored's page snapshot, gpus.middleware)."""

import re
import threading

import pytest
from django.db import connection
from django.urls import reverse

from brickadmin.cluster import scenarios
from brickadmin.cluster.snapshot import take_snapshot
from brickadmin.cluster.twin import TwinGateway
from gpus.view import publish as view_publish
from tests.conftest import require_service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture(autouse=True)
def on_postgresql():
    """The snapshot is PostgreSQL's: skipped elsewhere locally, a failure in CI."""
    require_service(connection.vendor == "postgresql", "PostgreSQL (DATABASE_URL)")


def _snapshot(name):
    objects, hardware, plugin_configs = scenarios.read(name)
    gw = TwinGateway()
    gw.load(objects, hardware, plugin_configs)
    return take_snapshot(gw)


def _dashboard_counts(html: str) -> tuple[int, int]:
    """(the units in all, the sum of the per-resource rows' units): one generation's totals
    (its state row) and its rows agree."""
    total = int(re.search(r'data-testid="gpu-total">(\d+)<', html).group(1))
    table = html.split('data-testid="headline-by-type"', 1)[1].split("</table>", 1)[0]
    rows = sum(int(n) for n in re.findall(r'<td class="num big-cell">(\d+)</td>', table))
    return total, rows


class _HeldPublication:
    """A publication in another thread and connection, held open between its writes (nodes,
    type and resource rows written, Workspaces and the state row not yet) until released."""

    def __init__(self, monkeypatch, snapshot):
        self.midway, self.go = threading.Event(), threading.Event()
        self.generation, self.error = None, None
        real = view_publish._write_workspaces

        def held(*args, **kwargs):
            if threading.current_thread() is self.thread:
                self.midway.set()
                self.go.wait(60)
            return real(*args, **kwargs)

        monkeypatch.setattr(view_publish, "_write_workspaces", held)
        self.thread = threading.Thread(target=self._publish, args=(snapshot,))

    def _publish(self, snapshot):
        try:
            self.generation = view_publish.publish(snapshot, watcher="watcher-1")
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            connection.close()

    def start(self):
        self.thread.start()
        assert self.midway.wait(60), "the publication reached its writes"

    def commit(self):
        self.go.set()
        self.thread.join(60)
        assert self.error is None and self.generation == 2


def test_a_page_shows_one_generation_whole_while_the_next_is_published(admin_client, unreachable, monkeypatch):
    view_publish.publish(_snapshot("seed-example"), watcher="watcher-1")
    before = _dashboard_counts(admin_client.get(reverse("dashboard")).content.decode())
    publication = _HeldPublication(monkeypatch, _snapshot("demo"))
    publication.start()

    # The page reads the state row while the publication is open; the publication commits
    # before the page reads the rest (its rows, per resource).
    def commit_after_the_first_read_of_the_view(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "gpus_viewstate" in sql and not publication.go.is_set():
            publication.commit()
        return result

    with connection.execute_wrapper(commit_after_the_first_read_of_the_view):
        during = _dashboard_counts(admin_client.get(reverse("dashboard")).content.decode())
    assert publication.go.is_set()
    after = _dashboard_counts(admin_client.get(reverse("dashboard")).content.decode())

    assert before[0] == before[1] and after[0] == after[1] and before != after
    assert during == before, "the page shows the generation it began reading, whole"


def test_a_page_shows_the_next_generation_whole_once_it_is_published(admin_client, unreachable, monkeypatch):
    view_publish.publish(_snapshot("seed-example"), watcher="watcher-1")
    before = _dashboard_counts(admin_client.get(reverse("dashboard")).content.decode())
    publication = _HeldPublication(monkeypatch, _snapshot("demo"))
    publication.start()
    during = _dashboard_counts(admin_client.get(reverse("dashboard")).content.decode())  # held open meanwhile
    publication.commit()
    after = _dashboard_counts(admin_client.get(reverse("dashboard")).content.decode())
    assert during == before
    assert after[0] == after[1] and after != before
