"""What each step of a run found and did reads in the reader's language, whatever language the
run was started in: its title, its output and what to fix, for the plan of every procedure;
and an audit decision's detail likewise."""

import pytest
from django.urls import reverse
from django.utils import translation
from django.utils.html import escape

from brickadmin import wording
from brickadmin.cluster.models import TwinHardware
from gpus.models import RUN_EVENT_KEY, ProcedureRun
from gpus.procedures import service
from gpus.procedures.recording import plan
from gpus.tasks import execute_run
from tests import mig_node

from .test_procedures_engine import add_blank_node

pytestmark = pytest.mark.usefixtures("fast_engine")


def add_mig_node(twin):
    twin.apply(mig_node.node("gpu-mig-01"))
    TwinHardware.objects.create(node="gpu-mig-01", gpus=mig_node.hardware("gpu-mig-01"))
    for obj in mig_node.operator_objects():
        twin.apply(obj)


def convert_another_node_first(twin):
    """Two time-slicing nodes: converting one back leaves room for the shared quota."""
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(run.pk)


# (procedure, node, parameters, what the cluster needs first)
PLANS = [
    ("A", "dev-a1-ws04", {}, None),
    ("B", "dev-a1-ws02", {}, convert_another_node_first),
    ("C", "", {"replicas": 3}, None),
    ("D", "gpu-new-01", {"sharing": "timeslicing"}, add_blank_node),  # stops at its checklist
    ("M", "gpu-mig-01", {"mig_config": "all-1g.10gb"}, add_mig_node),
]
LANGUAGES = [("en", "ko"), ("ko", "en")]


def page_in(client, url, language):
    client.cookies["django_language"] = language
    return client.get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode()


def said_in(language, record):
    with translation.override(language):
        return wording.render(record)


@pytest.mark.parametrize("started_in,read_in", LANGUAGES)
@pytest.mark.parametrize("code,node,params,prepare", PLANS, ids=[p[0] for p in PLANS])
def test_a_runs_steps_read_in_the_readers_language(
    twin, admin_client, code, node, params, prepare, started_in, read_in
):
    if prepare:
        prepare(twin)
    with translation.override(started_in):
        run = service.start_run(code, node, params, actor_name="root", dispatch=False)
        execute_run(run.pk)
    run = ProcedureRun.objects.get(pk=run.pk)
    page = page_in(admin_client, reverse("run_detail", args=[run.pk]), read_in)

    with translation.override(read_in):
        wanted = [str(title) for _step, title, _kubectl in plan(code, node, params)]
    with translation.override(started_in):
        other = [str(title) for _step, title, _kubectl in plan(code, node, params)]
    for title, not_wanted in zip(wanted, other, strict=True):
        assert escape(title) in page, title
        if not_wanted != title:
            assert escape(not_wanted) not in page, not_wanted

    # What each step said last (its row in the table: output, and what to fix when it stopped).
    latest = {}
    for event in run.steps.exclude(step_key=RUN_EVENT_KEY).order_by("seq"):
        latest[event.step_key] = event
    details = [
        (said_in(read_in, record), said_in(started_in, record))
        for event in latest.values()
        for record in ((event.said or {}).get("output"), (event.said or {}).get("error"))
        if record is not None and record.get("code", "").startswith(("step.", "text."))
    ]
    assert details, f"no step of run {code} said anything by code"
    for shown, not_shown in details:
        assert escape(shown) in page, shown
        if not_shown != shown:
            assert escape(not_shown) not in page, not_shown


def test_the_step_texts_differ_between_the_languages(twin, admin_client):
    """The test above compares texts: here, that a step's detail really reads in Korean."""
    run = service.start_run("A", "dev-a1-ws04", {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    korean = page_in(admin_client, reverse("run_detail", args=[run.pk]), "ko")
    assert "spec.unschedulable이 true입니다" in korean
    english = page_in(admin_client, reverse("run_detail", args=[run.pk]), "en")
    assert "spec.unschedulable is true" in english
    assert "spec.unschedulable is true" not in korean


@pytest.mark.parametrize("started_in,read_in", LANGUAGES)
def test_a_decisions_detail_reads_in_the_readers_language(admin_user, admin_client, started_in, read_in):
    from workspaces import jobs

    with translation.override(started_in):
        jobs.set_job_approval(admin_user, False)  # on by default
    page = page_in(admin_client, reverse("workspace_audit"), read_in)
    wanted = {"en": "Job approval required: no", "ko": "Job 승인 필요: 아니요"}
    assert wanted[read_in] in page
    assert wanted[started_in] not in page


def test_texts_put_together_keep_each_message_in_the_readers_language():
    plain = wording.joined(["node/gpu-1 cordoned", "", "spec ok"])
    assert plain == "node/gpu-1 cordoned\nspec ok"  # no message among them: plain text, as before
    lines = wording.joined(["evicting pod a/b", wording.said("step.drained", node="gpu-1")])
    record = lines.as_record()
    assert said_in("en", record) == "evicting pod a/b\nno evictable pod left on gpu-1"
    assert said_in("ko", record) == "evicting pod a/b\ngpu-1에 축출할 pod가 남아 있지 않습니다"
    sentences = wording.joined([wording.said("step.drained", node="gpu-1"), "Then resume."], " ")
    assert said_in("en", sentences.as_record()) == "no evictable pod left on gpu-1 Then resume."


def cordon(twin):
    twin.cordon("dev-a1-ws04")


# Fixes record their pre-checks the same way (one is enough: they share the step).
FIXES = [("U", "dev-a1-ws04", {}, cordon)]


@pytest.mark.parametrize("started_in,read_in", LANGUAGES)
@pytest.mark.parametrize("code,node,params,prepare", PLANS + FIXES, ids=[p[0] for p in PLANS + FIXES])
def test_a_runs_prechecks_read_in_the_readers_language(
    twin, admin_client, code, node, params, prepare, started_in, read_in
):
    """Step 0 records the pre-checks as the plan showed them: each reader reads every line of
    them (each check, and the capacity table under it) in their own language."""
    if prepare:
        prepare(twin)
    with translation.override(started_in):
        run = service.start_run(code, node, params, actor_name="root", dispatch=False)
        execute_run(run.pk)
    page = page_in(admin_client, reverse("run_detail", args=[run.pk]), read_in)

    precheck = run.steps.filter(step_key="precheck").exclude(output="").order_by("seq").last()
    record = (precheck.said or {}).get("output")
    assert record is not None, f"step 0 of run {code} recorded its pre-checks as text, not as messages"
    shown, not_shown = said_in(read_in, record), said_in(started_in, record)
    assert shown != not_shown, "the pre-checks read the same in both languages"
    lines = [line.strip() for line in shown.splitlines()]
    for line in lines:
        assert escape(line) in page, line
    for line in not_shown.splitlines():
        if line.strip() not in lines:
            assert escape(line.strip()) not in page, line


def test_a_precheck_counting_pods_says_the_form_for_its_number_in_each_language():
    for n, english, korean in (
        (1, "1 GPU pod on gpu-1 will be evicted (2 pod(s) in all):", "gpu-1의 GPU Pod 1개가 축출(evict)됩니다"),
        (3, "3 GPU pods on gpu-1 will be evicted (4 pod(s) in all):", "gpu-1의 GPU Pod 3개가 축출(evict)됩니다"),
    ):
        record = wording.said("precheck.gpu_pods_evicted", n=n, node="gpu-1", all=n + 1).as_record()
        assert said_in("en", record) == english
        assert said_in("ko", record).startswith(korean)


@pytest.mark.parametrize("language", ["en", "ko"])
def test_the_plan_page_and_the_terminal_show_the_prechecks_in_the_current_language(
    twin, admin_client, capsys, language
):
    from django.core.management import call_command

    summary = {
        "en": "dev-a1-ws04: exclusive, 1 physical GPU(s), sharing label none",
        "ko": "dev-a1-ws04: exclusive, 물리 GPU 1개, sharing 라벨 none",
    }
    other = "ko" if language == "en" else "en"
    page = page_in(admin_client, reverse("wizard_plan", args=["A"]) + "?node=dev-a1-ws04", language)
    assert escape(summary[language]) in page and escape(summary[other]) not in page
    with translation.override(language):
        call_command("procedure", "plan", "A", "--node", "dev-a1-ws04")
    out = capsys.readouterr().out
    assert summary[language] in out and summary[other] not in out
