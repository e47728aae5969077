"""A run reads in the reader's language, whatever language the admin who started it used:
its steps' titles, its events and its outcome are said when the page is read."""

import re

import pytest
from django.urls import reverse
from django.utils import translation

from gpus.models import ProcedureRun, StepRun
from gpus.procedures import service
from gpus.procedures.recording import RUN_EVENT, record
from gpus.tasks import execute_run

pytestmark = pytest.mark.usefixtures("fast_engine")

NODE = "dev-a1-ws04"


def run_started_in(language):
    with translation.override(language):
        run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
        execute_run(run.pk)
    return run


def page_in(client, run, language):
    client.cookies["django_language"] = language
    return client.get(reverse("run_detail", args=[run.pk]), HTTP_ACCEPT_LANGUAGE=language).content.decode()


def test_a_run_started_in_english_reads_in_korean_to_a_korean_reader(twin, admin_client):
    run = run_started_in("en")
    page = page_in(admin_client, run, "ko")
    assert f"{NODE} 격리 (cordon)" in page  # the step's title
    assert "root이(가) 실행 생성" in page  # the run-created event
    assert "사전 점검 이후 단계" in page and "모두 완료" in page  # the outcome
    assert "실행 성공" in page
    assert f"Cordon {NODE}" not in page and "steps after the pre-check" not in page and "Run created by" not in page


def test_a_run_started_in_korean_reads_in_english_to_an_english_reader(twin, admin_client):
    run = run_started_in("ko")
    page = page_in(admin_client, run, "en")
    assert f"Cordon {NODE}" in page
    assert "Run created by root" in page
    assert "steps after the pre-check." in page and "Run succeeded" in page
    assert "격리" not in page and "실행 생성" not in page and "모두 완료" not in page


def test_a_cancelled_run_names_its_step_in_the_readers_language(twin, admin_client):
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    ProcedureRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.message.startswith("Cancelled before step ")  # as written
    korean = page_in(admin_client, run, "ko")
    assert "단계 전에 취소되었습니다." in korean and "Cancelled before step" not in korean
    english = page_in(admin_client, run, "en")
    assert "Cancelled before step" in english


def test_a_run_recorded_before_message_codes_reads_as_written(twin, admin_client):
    """Rows written before codes (text only) still show their text."""
    run = run_started_in("en")
    record(run.pk, step_key=RUN_EVENT, title="Checked by an older version", state="succeeded")
    assert StepRun.objects.filter(run=run, title="Checked by an older version", said__isnull=True).exists()
    assert "Checked by an older version" in page_in(admin_client, run, "ko")


def test_every_event_in_the_audit_record_says_what_it_was(twin, admin_client):
    """A step's start, its requests and its end each say something: no bare repeated "Running"."""
    run = run_started_in("en")
    page = page_in(admin_client, run, "en")
    log = page[page.index('id="run-events"') :]
    cordon = [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", li)).split(" Running ", 1)[-1].strip()
        for li in re.findall(r'<li id="event-\d+"[^>]*data-step="cordon"[^>]*data-state="running">.*?</li>', log, re.S)
    ]
    assert cordon == [
        f"1. Cordon {NODE} — started",
        f"1. Cordon {NODE} — about to send: cordon node {NODE}",
        f"1. Cordon {NODE} — sent: cordon node {NODE}",
    ]
    korean = page_in(admin_client, run, "ko")
    assert '— <span class="muted">시작</span>' in korean


def test_the_wizards_node_list_names_each_nodes_mode_by_its_name(twin, admin_client):
    url = reverse("wizard_pick", args=["A"])
    english = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert re.search(rf'value="{NODE}".*?GPU · Exclusive<', english, re.S)
    admin_client.cookies["django_language"] = "ko"
    korean = admin_client.get(url, HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    # the product keeps the mode names in Korean too (locale/ko), but as names, not label values
    assert re.search(rf'value="{NODE}".*?GPU · Exclusive<', korean, re.S) and "GPU · exclusive<" not in korean


def test_a_manifest_version_a_run_saved_reads_its_note_in_the_readers_language(twin, admin_client):
    with translation.override("ko"):
        run = service.start_run("C", "", {"replicas": 3}, actor_name="root", dispatch=False)
        execute_run(run.pk)
    english = admin_client.get(reverse("manifest"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f"procedure C run #{run.pk}: replicas " in english and "-&gt; 3" in english
    admin_client.cookies["django_language"] = "ko"
    korean = admin_client.get(reverse("manifest"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert f"절차 C 실행 #{run.pk}: replicas " in korean and f"procedure C run #{run.pk}" not in korean
