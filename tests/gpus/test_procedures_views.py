"""Wizard pages, run pages, history, audit downloads, manifest and health pages."""

import csv
import io
import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from gpus.models import ProcedureRun
from gpus.procedures import engine, service
from gpus.tasks import execute_run

pytestmark = pytest.mark.usefixtures("fast_engine")


def test_pages_are_for_admins_only(twin, alice_client):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    for url in (
        reverse("procedure_index"),
        reverse("wizard_pick", args=["A"]),
        reverse("run_list"),
        reverse("run_detail", args=[run.pk]),
        reverse("run_audit_json", args=[run.pk]),
        reverse("manifest"),
        reverse("health"),
    ):
        assert alice_client.get(url).status_code == 403, url
    assert alice_client.post(reverse("run_cancel", args=[run.pk])).status_code == 403
    assert alice_client.post(reverse("wizard_start", args=["A"]), {"node": "dev-a1-ws04"}).status_code == 403


def test_pick_shows_ineligible_nodes_disabled_with_reason(demo, admin_client):
    page = admin_client.get(reverse("wizard_pick", args=["A"])).content.decode()
    assert 'value="gpu-a30-01"' in page and 'value="gpu-a30-03" disabled' in page
    assert "Already time-slicing." in page
    page_b = admin_client.get(reverse("wizard_pick", args=["B"])).content.decode()
    assert 'value="gpu-a30-01" disabled' in page_b and "Already exclusive." in page_b
    page_d = admin_client.get(reverse("wizard_pick", args=["D"])).content.decode()
    assert 'value="cpu-01"' in page_d and 'value="gpu-a30-01" disabled' in page_d


def test_plan_lists_steps_with_kubectl_and_prechecks(twin, admin_client):
    r = admin_client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"})
    page = r.content.decode()
    assert r.status_code == 200
    assert "kubectl drain dev-a1-ws04 --ignore-daemonsets --delete-emptydir-data" in page
    assert "kubectl label node dev-a1-ws04 brick.cloud/gpu.sharing=timeslicing --overwrite" in page
    assert "nvidia.com~1gpu" in page and "kubectl uncordon dev-a1-ws04" in page
    assert not ProcedureRun.objects.exists()  # nothing runs before the confirm


def test_plan_b_blocked_names_workspaces_and_disables_confirm(twin, admin_client):
    page = admin_client.get(reverse("wizard_plan", args=["B"]), {"node": "dev-a1-ws02"}).content.decode()
    assert "ws-shared (owner bob)" in page
    assert 'type="submit" disabled' in page
    r = admin_client.post(reverse("wizard_start", args=["B"]), {"node": "dev-a1-ws02"})
    assert r.status_code == 400 and not ProcedureRun.objects.exists()


def test_confirm_creates_run_and_second_wizard_is_refused_with_link(twin, admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    plan = client.get(reverse("wizard_plan", args=["A"]), {"node": "dev-a1-ws04"})
    token = plan.cookies["csrftoken"].value if "csrftoken" in plan.cookies else client.cookies["csrftoken"].value
    assert client.post(reverse("wizard_start", args=["A"]), {"node": "dev-a1-ws04"}).status_code == 403  # no token
    # the only exclusive node: its allocated exclusive quota is then over the Total, acknowledged
    confirmed = {"node": "dev-a1-ws04", "csrfmiddlewaretoken": token, "capacity_acknowledged": "1"}
    r = client.post(reverse("wizard_start", args=["A"]), confirmed)
    run = ProcedureRun.objects.get()
    assert r.status_code == 302 and r["Location"] == reverse("run_detail", args=[run.pk])
    assert run.actor == admin_user and run.actor_name == "root" and run.status == "pending"
    again = client.post(reverse("wizard_start", args=["A"]), confirmed)
    assert again.status_code == 409
    assert reverse("run_detail", args=[run.pk]) in again.content.decode()
    assert ProcedureRun.objects.count() == 1


def test_run_page_progress_partial_and_catch_up(twin, admin_client):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    page = admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert f'sse-connect="{reverse("run_stream", args=[run.pk])}?after={run.last_seq}' in page
    assert 'id="step-drain"' in page and 'role="log"' in page and 'aria-live="polite"' in page
    url = reverse("run_progress", args=[run.pk])
    run.refresh_from_db()
    assert admin_client.get(url, {"after": run.last_seq, "status": run.status}).status_code == 204
    execute_run(run.pk)
    run.refresh_from_db()
    # a browser that was at "after N" catches up with everything from the rows
    r = admin_client.get(url, {"after": 3, "status": "pending"})
    body = r.content.decode()
    assert r.status_code == 200 and 'data-state="succeeded"' in body and "sse-connect" not in body
    assert body.count('class="step state-succeeded"') == 10


def sse_events(body: str) -> list[dict]:
    """The Server-Sent Events of a stream's body: [{"event", "id", "data"}] (comments dropped)."""
    out = []
    for block in body.split("\n\n"):
        fields = {"data": []}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name == "data":
                fields["data"].append(value)
            elif name in ("event", "id"):
                fields[name] = value
        if "event" in fields:
            out.append({**fields, "data": "\n".join(fields["data"])})
    return out


def announced(events) -> list[str]:
    return [m for e in events for m in re.findall(r'<p data-seq="[0-9]+">([^<]*)</p>', e["data"])]


def test_run_stream_sends_each_row_after_the_last_seen_and_announces_steps(twin, admin_client):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    planned = run.last_seq
    execute_run(run.pk)
    run.refresh_from_db()
    url = reverse("run_stream", args=[run.pk])
    r = admin_client.get(url, {"after": planned, "status": "pending", "cancel": "0"})
    cache = {part.strip() for part in r["Cache-Control"].split(",")}
    assert r["Content-Type"] == "text/event-stream" and {"no-cache", "no-store"} <= cache
    events = sse_events(b"".join(r.streaming_content).decode())
    steps = [e for e in events if e["event"] == "step"]
    assert steps[-1]["id"] == str(run.last_seq)  # a browser reconnecting resumes after the last row it got
    shown = [int(n) for e in steps for n in re.findall(r'<li id="event-([0-9]+)"', e["data"])]
    assert shown == list(range(planned + 1, run.last_seq + 1))  # every row after the page's, once, in order
    assert events[-1]["event"] == "done"  # the run has ended: the page closes its EventSource
    said = announced(steps)
    assert "Pre-check started: Pre-check." in said or any(s.startswith("Pre-check started") for s in said)
    assert "Step 2 of 9 started: Drain dev-a1-ws04." in said or any(
        s.startswith("Step 2 of 9 started: Drain") for s in said
    )
    assert any(s.startswith("Step 9 of 9 done") for s in said)
    assert said[-1].startswith("Run succeeded.")
    last = steps[-1]["data"]
    assert 'id="run-status" data-status="succeeded" hx-swap-oob="true"' in last
    assert 'id="what-next-node"' in last and reverse("node_detail", args=["dev-a1-ws04"]) in last
    assert 'id="cancel-run"' not in last

    # A browser reconnecting after event N (Last-Event-ID) gets only what came after it.
    again = admin_client.get(url, {"after": planned}, HTTP_LAST_EVENT_ID=str(run.last_seq - 2))
    events = sse_events(b"".join(again.streaming_content).decode())
    shown = [int(n) for e in events for n in re.findall(r'<li id="event-([0-9]+)"', e["data"])]
    assert shown == [run.last_seq - 1, run.last_seq]


@pytest.mark.django_db(transaction=True)
def test_run_stream_under_asgi_is_an_async_stream_resuming_after_last_event_id(twin, admin_user):
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    client = AsyncClient()
    client.force_login(admin_user)

    async def read():
        r = await client.get(reverse("run_stream", args=[run.pk]), headers={"Last-Event-ID": str(run.last_seq - 1)})
        assert r.is_async  # served by an async iterator: no worker thread held while it waits
        return b"".join([chunk async for chunk in r.streaming_content]).decode()

    events = sse_events(async_to_sync(read)())
    assert [e["event"] for e in events] == ["step", "done"] and events[0]["id"] == str(run.last_seq)
    assert re.findall(r'<li id="event-([0-9]+)"', events[0]["data"]) == [str(run.last_seq)]
    assert announced(events)[0].startswith("Run succeeded.")


@pytest.mark.django_db(transaction=True)
def test_the_rows_a_page_missed_while_loading_come_in_the_streams_first_write(twin, admin_user):
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    client = AsyncClient()
    client.force_login(admin_user)

    async def first_write():
        r = await client.get(reverse("run_stream", args=[run.pk]), {"after": "1", "status": "pending"})
        chunks = r.streaming_content.__aiter__()
        try:
            return (await chunks.__anext__()).decode()
        finally:
            await chunks.aclose()

    first = async_to_sync(first_write)()
    assert first.startswith("retry:")  # the browser's reconnection delay, then the rows at once
    events = sse_events(first)
    shown = [int(n) for e in events for n in re.findall(r'<li id="event-([0-9]+)"', e["data"])]
    assert shown == list(range(2, run.last_seq + 1)) and events[-1]["id"] == str(run.last_seq)
    assert "done" not in [e["event"] for e in events]  # the run has not ended: the stream waits on


def same_page(html: str) -> str:
    """A page with its CSRF tokens left out (each render masks the token anew)."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', 'name="csrfmiddlewaretoken"', html)
    return re.sub(r'"X-CSRFToken": "[^"]+"', '"X-CSRFToken"', html)


def as_a_korean_reader_in_seoul(client):
    client.cookies["django_language"] = "ko"
    client.cookies["brick_tz"] = "Asia%2FSeoul"


@pytest.mark.django_db(transaction=True)
def test_a_live_runs_page_under_asgi_is_the_same_page_in_the_readers_language_and_zone(twin, admin_user):
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    url = reverse("run_detail", args=[run.pk])
    plain, client = Client(), AsyncClient()
    for c in (plain, client):
        c.force_login(admin_user)
        as_a_korean_reader_in_seoul(c)
    expected = plain.get(url).content.decode()

    async def read():
        r = await client.get(url)
        assert r.status_code == 200 and r.is_async and r["Content-Type"] == "text/html; charset=utf-8"
        return b"".join([chunk async for chunk in r.streaming_content]).decode()

    page = async_to_sync(read)()
    assert same_page(page) == same_page(expected)
    assert "감사 기록" in page and "KST" in page  # the region, sent last, in Korean and the reader's zone
    assert "<!--run-progress-->" not in page


@pytest.mark.django_db(transaction=True)
def test_rows_committed_after_a_live_runs_page_started_going_out_are_on_the_page(twin, admin_user):
    from asgiref.sync import async_to_sync, sync_to_async
    from django.db import connections
    from django.test import AsyncClient

    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    planned = run.last_seq
    client = AsyncClient()
    client.force_login(admin_user)

    def work():  # the worker, in a thread of its own (its connection closed after)
        try:
            execute_run(run.pk)
        finally:
            connections.close_all()

    async def read():
        r = await client.get(reverse("run_detail", args=[run.pk]))
        chunks = aiter(r.streaming_content)
        head = (await anext(chunks)).decode()
        await sync_to_async(work, thread_sensitive=False)()  # the whole run, once the page began
        return head, b"".join([chunk async for chunk in chunks]).decode()

    head, rest = async_to_sync(read)()
    assert 'id="content"' in head and 'id="run-progress"' not in head  # the page around the region first
    # The stream can open before the rows are read: the part sent first names it, after the rows there were
    stream = reverse("run_stream", args=[run.pk])
    assert f'data-stream="{stream}?after={planned}&amp;status=pending&amp;cancel=0"' in head
    run.refresh_from_db()
    assert run.last_seq > planned + 9
    shown = [int(n) for n in re.findall(r'<li id="event-([0-9]+)"', rest)]
    assert shown == list(range(1, run.last_seq + 1))  # every row, in order, none twice
    assert 'data-status="succeeded"' in rest and f'data-last-seq="{run.last_seq}"' in rest


@pytest.mark.django_db(transaction=True)
def test_an_open_stream_under_asgi_sends_the_rows_as_the_worker_commits_them(twin, admin_user, settings, monkeypatch):
    import asyncio

    from asgiref.sync import async_to_sync
    from django.db import connections
    from django.test import AsyncClient

    monkeypatch.setenv("BRICK_PROCEDURE_STEP_PAUSE", "0.05")  # the rows come while the stream waits
    settings.BRICK_RUN_STREAM_SECONDS = 60  # a stream nothing woke would end without "done"
    settings.BRICK_RUN_STREAM_KEEPALIVE_SECONDS = 60
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    planned = run.last_seq
    client = AsyncClient()
    client.force_login(admin_user)

    def work():  # the worker, in a thread of its own (its connection closed after)
        try:
            execute_run(run.pk)
        finally:
            connections.close_all()

    async def watch():
        url = reverse("run_stream", args=[run.pk])
        r = await client.get(url, {"after": planned, "status": "pending", "cancel": "0"})
        chunks = aiter(r.streaming_content)
        first = await anext(chunks)  # the stream is open (its retry line) before the worker starts
        worker = asyncio.get_running_loop().run_in_executor(None, work)
        rest = [chunk async for chunk in chunks]
        await worker
        return b"".join([first, *rest]).decode()

    events = sse_events(async_to_sync(watch)())
    run.refresh_from_db()
    steps = [e for e in events if e["event"] == "step"]
    shown = [int(n) for e in steps for n in re.findall(r'<li id="event-([0-9]+)"', e["data"])]
    assert run.status == "succeeded" and shown == list(range(planned + 1, run.last_seq + 1))
    assert len(steps) > 9  # sent as they came (each step at least), not all at the end
    assert events[-1]["event"] == "done"
    # Each read after the first asked only for the new rows: the table the stream left is still
    # the one the finished run's page shows, step by step.
    streamed = {}
    for e in steps:
        for row in re.findall(r'<tr id="step-.*?</tr>', e["data"], flags=re.S):
            streamed[row.split('"')[1]] = row.replace(' hx-swap-oob="true"', "")
    page_client = Client()
    page_client.force_login(admin_user)
    page = page_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    on_page = {row.split('"')[1]: row for row in re.findall(r'<tr id="step-.*?</tr>', page, flags=re.S)}
    assert len(on_page) == 10 and streamed == on_page
    count = re.compile(r'<span id="event-count"[^>]*>([^<]*)</span>')
    assert count.findall(steps[-1]["data"]) == count.findall(page) == [f"Audit record: {run.last_seq} events"]


def test_a_page_refused_its_stream_can_follow_the_run_by_polling_its_progress(twin, admin_client, settings):
    settings.BRICK_RUN_STREAM_RETRY_AFTER_SECONDS = 7
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    run.refresh_from_db()
    page = admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    progress = reverse("run_progress", args=[run.pk])
    assert f'data-progress="{progress}" data-poll-seconds="7"' in page  # what static/js/run-stream.js polls
    assert admin_client.get(progress, {"after": run.last_seq, "status": run.status}).status_code == 204
    execute_run(run.pk)
    moved = admin_client.get(progress, {"after": run.last_seq, "status": "pending"})
    assert moved.status_code == 200 and 'id="run-progress"' in moved.content.decode()
    assert 'data-status="succeeded"' in moved.content.decode()


def test_success_says_what_next_and_a_restored_run_offers_no_resume(twin, admin_client):
    a = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(a.pk)
    page = admin_client.get(reverse("run_detail", args=[a.pk])).content.decode()
    assert "What next" in page and f'href="{reverse("node_detail", args=["dev-a1-ws04"])}"' in page
    assert f"{reverse('wizard_pick', args=['B'])}?node=dev-a1-ws04" in page  # undo: convert it back
    assert "9 of 9 steps after the pre-check done." in page and 'value="10"' in page
    assert "about to send: cordon node dev-a1-ws04" in page  # each write-ahead event says what it sent

    stopped = service.start_run("B", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    service.cancel_run(stopped, actor_name="root")
    restore = service.start_run(
        "R",
        "dev-a1-ws04",
        {"restore_of": stopped.pk, "labels": {}, "uncordon": False},
        actor_name="root",
        dispatch=False,
    )
    page = admin_client.get(reverse("run_detail", args=[stopped.pk])).content.decode()
    assert reverse("run_resume", args=[stopped.pk]) not in page
    assert f"Restored by run #{restore.pk}" in page
    admin_client.post(reverse("run_resume", args=[stopped.pk]))  # a Resume posted anyway is refused
    stopped.refresh_from_db()
    assert stopped.status == "cancelled"
    restore_page = admin_client.get(reverse("run_detail", args=[restore.pk])).content.decode()
    # its parameters as people read them, not a Python dict
    header = restore_page[restore_page.index("parameters: <code>") :]
    header = header[: header.index("</code>")]
    assert f"Run to undo: {stopped.pk}" in header and "GPU labels put back: -" in header and "Uncordon: no" in header
    assert "{" not in header and "False" not in header


def test_cancel_and_resume_buttons(twin, admin_client):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    admin_client.post(reverse("run_cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "cancelled"
    page = admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert reverse("run_resume", args=[run.pk]) in page
    admin_client.post(reverse("run_resume", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == "pending"
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_history_filters_and_node_link(twin, admin_client):
    b = service.start_run("B", "dev-a1-ws02", {}, actor_name="ops", dispatch=False)
    execute_run(b.pk)  # blocked by the pre-check: failed
    a = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(a.pk)
    page = admin_client.get(reverse("run_list"), {"node": "dev-a1-ws04"}).content.decode()
    assert f">#{a.pk}<" in page and f">#{b.pk}<" not in page
    page = admin_client.get(reverse("run_list"), {"status": "failed"}).content.decode()
    assert f">#{b.pk}<" in page and f">#{a.pk}<" not in page
    partial = admin_client.get(reverse("run_list"), {"procedure": "A"}, HTTP_HX_REQUEST="true").content.decode()
    assert partial.strip().startswith('<div id="run-table">') and "<html" not in partial
    node_page = admin_client.get(reverse("node_detail", args=["dev-a1-ws02"])).content.decode()
    assert reverse("wizard_pick", args=["B"]) in node_page and "?node=dev-a1-ws02" in node_page


def test_history_is_paginated(twin, admin_client, settings):
    settings.PAGE_SIZE = 2
    for _i in range(3):
        r = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
        service.cancel_run(r, actor_name="root")
    page = admin_client.get(reverse("run_list")).content.decode()
    assert "Page 1 of 2" in page


def test_audit_downloads(twin, admin_client):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    data = json.loads(admin_client.get(reverse("run_audit_json", args=[run.pk])).content)
    assert data["run"]["actor"] == "root" and data["run"]["status"] == "succeeded"
    seqs = [e["seq"] for e in data["events"]]
    assert seqs == sorted(seqs) and len(seqs) == run.steps.count()
    assert any(e["step_key"] == "remove-stale" and e["sent"] for e in data["events"])
    r = admin_client.get(reverse("run_audit_csv", args=[run.pk]))
    assert r["Content-Disposition"].endswith('audit.csv"')
    rows = list(csv.reader(io.StringIO(r.content.decode())))
    assert rows[0][:3] == ["run", "procedure", "node"] and rows[1][2] == "dev-a1-ws04"
    assert rows[3][:5] == ["seq", "recorded_at", "step_key", "title", "state"]
    assert len(rows) - 4 == run.steps.count()


def test_django_admin_is_read_only(twin, admin_user, client):
    admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    assert client.get(f"/django-admin/gpus/procedurerun/{run.pk}/change/").status_code == 200
    assert client.get(f"/django-admin/gpus/procedurerun/{run.pk}/delete/").status_code == 403
    assert client.get("/django-admin/gpus/steprun/add/").status_code == 403
    assert client.post(f"/django-admin/gpus/procedurerun/{run.pk}/change/", {"status": "succeeded"}).status_code == 403


def test_manifest_page_shows_drift_after_hand_edit(twin, admin_client):
    page = admin_client.get(reverse("manifest")).content.decode()
    assert page.count('data-state="in-sync"') == 7  # three ConfigMaps, four DaemonSets
    cm = twin.get_configmap("brick-nvidia", "nvidia-device-plugin-config-timeslicing")
    cm["data"]["config.yaml"] = cm["data"]["config.yaml"].replace("replicas: 2", "replicas: 3")
    twin.apply(cm)  # someone edited the live object by hand
    page = admin_client.get(reverse("manifest")).content.decode()
    assert 'data-state="drifted"' in page and "nvidia-device-plugin-config-timeslicing" in page
    admin_client.post(reverse("manifest_apply"))
    cm = twin.get_configmap("brick-nvidia", "nvidia-device-plugin-config-timeslicing")
    assert "replicas: 2" in cm["data"]["config.yaml"]


def test_manifest_save_refuses_invalid_version(twin, admin_client):
    from gpus import manifest

    content = manifest.current().content.replace("replicas: 2", "replicas: 1")
    admin_client.post(reverse("manifest_save"), {"content": content, "note": "x"})
    assert manifest.current().version == 1
    ok = manifest.current().content.replace("replicas: 2", "replicas: 3")
    admin_client.post(reverse("manifest_save"), {"content": ok, "note": "three"})
    assert manifest.current().version == 2 and manifest.current().actor_name == "root"


def test_health_page_lists_demo_problems(demo, admin_client):
    page = admin_client.get(reverse("health")).content.decode()
    for kind in ("stale-capacity", "label-typo", "plugin-missing", "replicas-not-reflected", "manifest-drift"):
        assert f'data-kind="{kind}"' in page, kind


def test_d_checklist_confirmed_on_the_run_page(twin, admin_client, monkeypatch, django_capture_on_commit_callbacks):
    from .test_procedures_engine import add_blank_node

    add_blank_node(twin)
    monkeypatch.setattr(service, "enqueue", lambda run_id: execute_run(run_id))  # the worker, inline
    run = service.start_run("D", "gpu-new-01", {"sharing": "none"}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "failed"
    page = admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert reverse("run_confirm_checklist", args=[run.pk]) in page
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(reverse("run_confirm_checklist", args=[run.pk]), {"checklist_confirmed": "on"})
    run.refresh_from_db()
    assert run.status == "succeeded", run.message
    assert "Confirmed by root" in run.steps.get(step_key="checklist", state="succeeded").output
    assert twin.get_node("gpu-new-01")["metadata"]["labels"]["brick.cloud/gpu.type"] == "nvidia"


@pytest.mark.parametrize("v", ["abc", "1e5", "1.0", "-1", " 1", "²", "99999999999999999999999"])
def test_manifest_version_that_is_not_a_number_is_404(twin, admin_client, v):
    assert admin_client.get(reverse("manifest"), {"v": v}).status_code == 404


def test_manifest_version_by_number(twin, admin_client):
    assert admin_client.get(reverse("manifest"), {"v": "1"}).status_code == 200
    assert admin_client.get(reverse("manifest"), {"v": "7"}).status_code == 404


def test_audit_csv_cells_cannot_start_a_formula(twin, admin_client):
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="=cmd()", dispatch=False)
    service.cancel_run(run, actor_name="@SUM(1)")
    service.resume_run(run, actor_name="+1", dispatch=False)
    service.cancel_run(run, actor_name="-2")
    engine.record(
        run.pk,
        step_key=engine.RUN_EVENT,
        title="\tx",
        state="failed",
        output='=HYPERLINK("x")',
        error="\r=1",
        kubectl="@x",
    )
    rows = list(csv.reader(io.StringIO(admin_client.get(reverse("run_audit_csv", args=[run.pk])).content.decode())))
    cells = [c for row in rows for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    assert rows[1][3] == "'=cmd()"
    assert "'Cancelled by @SUM(1) before it started." not in cells  # only a leading character is escaped
    for escaped in ("'\tx", '\'=HYPERLINK("x")', "'\r=1", "'@x"):
        assert escaped in cells, escaped


def test_manifest_apply_of_unparsable_version_shows_a_message(twin, admin_client):
    from gpus import manifest
    from gpus.models import ManifestVersion

    cur = manifest.current()
    ManifestVersion.objects.create(version=cur.version + 1, content="kind: [unclosed", actor_name="root")
    r = admin_client.post(reverse("manifest_apply"), follow=True)
    assert r.status_code == 200
    page = r.content.decode()
    assert "Not valid YAML" in page and "Version 2 is not valid" in page
    assert ManifestVersion.objects.get(version=cur.version + 1).applied_at is None
