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


@pytest.mark.parametrize(
    "request_, words",
    [
        ({"call": "delete", "args": ["v1", "Pod", "train-0", "team-a"]}, "delete Pod team-a/train-0"),
        (
            {"call": "rollout_restart_daemonset", "args": ["brick-nvidia", "nvidia-device-plugin-timeslicing"]},
            "restart the pods of DaemonSet brick-nvidia/nvidia-device-plugin-timeslicing",
        ),
        (
            {"call": "remove_node_status_resources", "args": [NODE, ["nvidia.com/gpu"]]},
            f"remove nvidia.com/gpu from the status of node {NODE}",
        ),
        ({"call": "create_namespace", "args": ["team-a", {"a": "b"}]}, "create Namespace team-a"),
    ],
)
def test_each_write_to_the_cluster_reads_as_what_it_does(request_, words):
    with translation.override("en"):
        assert str(recording.call_words(request_)) == words


def test_a_runs_parameters_are_named_as_its_procedure_names_them():
    text = recording.params_text({"replicas": 4, "capacity_acknowledged": 0}, "C")
    assert text == "New replicas: 4"  # an acknowledgement the plan never asked for is not shown
    assert recording.params_text({"replicas": 4, "capacity_acknowledged": 2}, "C") == (
        "New replicas: 4 · GPUs over the Total acknowledged: 2"
    )
