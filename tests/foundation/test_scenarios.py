"""Scenario files: malformed input names the object and the field, and loads nothing."""

import pytest
from django.core.management import CommandError, call_command

from brickadmin.cluster.models import TwinObject

GOOD_NODE = """
  - apiVersion: v1
    kind: Node
    metadata: {name: n1, labels: {brick.cloud/gpu.type: nvidia, brick.cloud/gpu.sharing: none}}
    spec: {}
    status: {capacity: {cpu: "8"}, allocatable: {cpu: "8"}}
"""


@pytest.mark.parametrize(
    "body,message",
    [
        (
            "objects:"
            + GOOD_NODE
            + """
  - apiVersion: v1
    kind: Pod
    metadata: {name: p1, namespace: default}
    spec: {nodeName: n1, containers: [{name: c, resources: {limits: {nvidia.com/gpu: two}}}]}
""",
            "objects[1] (Pod p1): spec.containers[0].resources.limits[nvidia.com/gpu]: 'two' is not a whole number",
        ),
        (
            "objects:" + GOOD_NODE + "hardware:\n  n1:\n  - {model: NVIDIA A30}\n",
            "hardware[n1][0].uuid: required text field is missing",
        ),
        (
            "objects:" + GOOD_NODE + "hardware:\n  n1:\n  - {uuid: GPU-1, model: X, mig: [big]}\n",
            "hardware[n1][0].mig[0]: 'big' is not a MIG profile",
        ),
        (
            "objects:" + GOOD_NODE + "hardware:\n  n9:\n  - {uuid: GPU-1, model: X}\n",
            "hardware[n9]: no Node named 'n9'",
        ),
        (
            "objects:\n  - {apiVersion: v1, kind: Node, metadata: {name: Bad_Name}}\n",
            "objects[0] (Node Bad_Name): metadata.name: 'Bad_Name' is not a valid Kubernetes name",
        ),
        (
            "objects:\n  - {apiVersion: v1, kind: Gadget, metadata: {name: g}}\n",
            "objects[0].kind: 'Gadget' is not one of",
        ),
        (
            "objects:\n  - {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {a: 1}}}\n",
            "objects[0] (Node n1): metadata.labels[a]: 1 must be a string",
        ),
        ("objects: [\n", "not valid YAML"),
    ],
)
def test_malformed_scenario_names_object_and_field_and_loads_nothing(twin, tmp_path, body, message):
    before = TwinObject.objects.count()
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(CommandError) as err:
        call_command("load_scenario", str(path))
    assert message in str(err.value)
    assert TwinObject.objects.count() == before  # the seed-example twin is untouched


def test_unknown_scenario_lists_the_known_ones(db):
    with pytest.raises(CommandError, match="Known scenarios: demo, dra, layouts, qks, seed-example"):
        call_command("load_scenario", "nope")


def test_shipped_scenarios_match_their_generator(tmp_path, monkeypatch):
    """scenarios/*.yaml are what scenarios/build.py writes (nobody edited them by hand)."""
    import importlib.util

    from brickadmin.cluster.scenarios import SCENARIO_DIR

    spec = importlib.util.spec_from_file_location("build", SCENARIO_DIR / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    monkeypatch.setattr(build, "OUT", tmp_path)
    build.seed_example(), build.qks(), build.demo()
    for name in ("seed-example", "qks", "demo"):
        assert (tmp_path / f"{name}.yaml").read_text() == (SCENARIO_DIR / f"{name}.yaml").read_text()


def test_demo_setup_refuses_outside_the_demo(db, settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="for the demo only"):
        call_command("demo_setup")
    settings.DEBUG, settings.BRICK_CLUSTER = True, "kube"
    with pytest.raises(CommandError, match="for the demo only"):
        call_command("demo_setup")
