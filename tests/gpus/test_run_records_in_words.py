"""Run records in words: a finished run counts the steps after the pre-check ("Done: 9 of 9
steps after the pre-check", not "All 10 steps done" after "Step 9 of 9"), its writes read as
what they did ("set labels on node …"), in the reader's language, and a quota run names its
Workspace rather than "all time-slicing nodes"."""

import pytest
from django.urls import reverse
from django.utils import translation

from gpus.models import ProcedureRun
from gpus.procedures import recording, service
from gpus.tasks import execute_run

pytestmark = pytest.mark.django_db

NODE = "dev-a1-ws04"


def test_a_finished_run_counts_the_steps_after_the_pre_check(twin, admin_client, fast_engine):
    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    numbered = run.steps.exclude(step_index=0).values("step_index").distinct().count()
    assert run.shown_message == f"Done: {numbered} of {numbered} steps after the pre-check."
    page = admin_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "label_node(" not in page and "cordon(&quot;" not in page
    assert f"set labels on node {NODE}: " in page


def test_a_label_write_reads_in_words_in_either_language():
    request = {"call": "label_node", "args": [NODE, {"brick.cloud/gpu.sharing": "timeslicing", "old": None}]}
    said = recording.call_words(request)
    with translation.override("en"):
        assert str(said) == f"set labels on node {NODE}: brick.cloud/gpu.sharing=timeslicing, remove old"
    with translation.override("ko"):
        assert str(said) == f"노드 {NODE}에 레이블 설정: brick.cloud/gpu.sharing=timeslicing, old 제거"
    assert recording.call_words({"call": "apply", "args": ["x"]}) == 'apply("x")'  # no words of its own


def test_a_quota_run_names_its_workspace():
    run = ProcedureRun(procedure="Q", node="", params={"workspace": "ws-vision"})
    assert str(run.target) == "Workspace ws-vision"
