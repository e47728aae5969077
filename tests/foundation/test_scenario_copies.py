"""The tests' copy of a loaded scenario (tests/scenario_copies.py) is the twin a real load
leaves: the same objects, events, hardware and versions; only what a load draws at random
(uids, the plugin pods' name suffixes, the twin version) and the time differ."""
import json
import re

import pytest

from brickadmin.cluster import scenarios
from brickadmin.cluster.models import TwinEvent, TwinHardware, TwinObject, TwinState
from brickadmin.cluster.twin import TwinGateway
from tests import scenario_copies

UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
POD_SUFFIX = re.compile(r'([-a-z0-9]+)-([0-9a-f]{5})"')  # a DaemonSet's pod: its name and a random suffix
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def twin_rows() -> str:
    """Every row of the twin, with what a load draws at random named in order of appearance."""
    rows = {
        "objects": list(TwinObject.objects.order_by("kind", "namespace", "node_name", "name")
                        .values("kind", "namespace", "name", "body", "node_name", "holds_gpu")),
        "events": list(TwinEvent.objects.order_by("id").values("id", "kind", "namespace", "name", "type", "body")),
        "hardware": list(TwinHardware.objects.order_by("node").values("node", "gpus", "plugin_pod_uid", "advertised")),
        "state": list(TwinState.objects.values("id", "last_rv", "compacted_rv")),
    }
    text = json.dumps(rows, sort_keys=True)
    names: dict[str, str] = {}

    def named(prefix):
        return lambda m: names.setdefault(m.group(0), f"{prefix}{len(names)}")

    text = POD_SUFFIX.sub(lambda m: m.group(1) + "-" + names.setdefault(m.group(2), f"s{len(names)}") + '"', text)
    text = UID.sub(named("uid"), text)
    return TIME.sub("T", text)


@pytest.mark.parametrize("name", ["seed-example", "demo"])
def test_a_copied_scenario_is_the_twin_its_load_leaves(db, name):
    TwinGateway().load(*scenarios.read(name))
    loaded = twin_rows()
    for model in (TwinEvent, TwinObject, TwinHardware, TwinState):
        model.objects.all().delete()
    scenario_copies.load(name)
    first_copy = twin_rows()
    for model in (TwinEvent, TwinObject, TwinHardware, TwinState):
        model.objects.all().delete()
    scenario_copies.load(name)
    assert first_copy == loaded
    assert twin_rows() == loaded


def test_a_twin_that_holds_objects_is_replaced_by_a_real_load(db):
    scenario_copies.load("demo")
    scenario_copies.load("seed-example")
    copied = twin_rows()
    for model in (TwinEvent, TwinObject, TwinHardware, TwinState):
        model.objects.all().delete()
    TwinGateway().load(*scenarios.read("demo"))
    TwinGateway().load(*scenarios.read("seed-example"))
    assert twin_rows() == copied
