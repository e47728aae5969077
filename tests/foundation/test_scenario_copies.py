"""The tests' copy of a loaded scenario (tests/scenario_copies.py) is the twin a real load
leaves: the same objects, events, hardware and version counters; only what a load draws at
random (uids, the plugin pods' name suffixes, the twin version, and the order of the
controllers' writes, which follows those names) and the time differ."""

import json
import re

import pytest

from brickadmin.cluster import scenarios, twin_store
from brickadmin.cluster.models import TwinEvent, TwinHardware, TwinObject, TwinState
from brickadmin.cluster.twin import TwinGateway
from tests import scenario_copies

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
VERSION = re.compile(r'"resourceVersion": "\d+"')


def twin_rows() -> dict:
    """Every row of the twin, with what a load draws at random (uids, the plugin pods' name
    suffixes) named by the object it belongs to, and without the order in which the
    controllers wrote (it follows those random names, so two real loads differ in it)."""
    objects = [o.body for o in TwinObject.objects.all()]
    events = list(TwinEvent.objects.values("kind", "namespace", "name", "type", "body"))
    names = {}
    for body in objects + [e["body"] for e in events]:
        md = body["metadata"]
        name = md["name"]
        if body["kind"] == "Pod" and md.get("ownerReferences"):  # a DaemonSet's pod: name-<random>
            name = f"{md['ownerReferences'][0]['name']}@{body['spec'].get('nodeName', '')}"
            names[md["name"]] = name
        names[md["uid"]] = f"{body['kind']}/{md.get('namespace', '')}/{name}"

    def named(value) -> str:
        text = json.dumps(value, sort_keys=True)
        for drawn, name in names.items():
            text = text.replace(f'"{drawn}"', f'"{name}"')
        return VERSION.sub('"resourceVersion": "v"', TIME.sub("T", text))

    return {
        "objects": sorted(named(o) for o in objects),
        "events": sorted(named(e) for e in events),
        "hardware": sorted(
            named(h) for h in TwinHardware.objects.values("node", "gpus", "plugin_pod_uid", "advertised")
        ),
        "state": list(TwinState.objects.values("id", "last_rv", "compacted_rv")),
    }


@pytest.mark.parametrize("name", ["seed-example", "demo", "dra"])
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


def test_a_scenario_is_loaded_for_real_while_a_test_replaced_the_twins_code(db, monkeypatch):
    scenario_copies.load("seed-example")  # recorded before the replacement
    for model in (TwinEvent, TwinObject, TwinHardware, TwinState):
        model.objects.all().delete()
    monkeypatch.setattr(twin_store, "now_iso", lambda: "2030-01-01T00:00:00Z")
    scenario_copies.load("seed-example")
    stamps = {o.body["metadata"]["creationTimestamp"] for o in TwinObject.objects.all()}
    assert stamps == {"2030-01-01T00:00:00Z"}
