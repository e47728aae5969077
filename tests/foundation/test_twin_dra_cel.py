"""The twin allocates claims whose selectors use CEL beyond equality as the scheduler does
(tests/dra_cel_cluster.py, which the lab comparison uses too): ``||`` on productName, memory
compared as quantities, a pod that needs the search to go back on its first choice, a claim
nothing fits, and a selector error that keeps its pod waiting with the scheduler's words."""

from __future__ import annotations

import pytest

from brickadmin.cluster import dra_allocate, scenarios
from brickadmin.cluster.models import TwinObject
from brickadmin.cluster.twin import TwinGateway
from tests import dra_cel_cluster as cel

pytestmark = pytest.mark.django_db


def _bodies(kind):
    return list(TwinObject.objects.filter(kind=kind).values_list("body", flat=True))


def test_the_twin_allocates_cel_selectors_and_backtracks():
    objects, hardware, plugin_configs = scenarios.read("dra")
    TwinGateway().load(dra_allocate.unallocated(objects) + cel.objects(), hardware, plugin_configs)
    got = cel.outcome(_bodies("ResourceClaim"), _bodies("Pod"))
    assert got["h100-or-l4"] == {"node": cel.NODE, "devices": cel.EXPECTED["h100-or-l4"]}
    assert got["backtrack"] == {"node": cel.NODE, "devices": cel.EXPECTED["backtrack"]}
    assert got["too-big"] == {"waits": "Unschedulable", "error": None}
    assert got["cel-error"] == {"waits": "SchedulerError", "error": "CEL runtime error: no such key: nvlinkDomain"}
    assert got["no-class"] == {
        "waits": "Unschedulable",
        "error": "request gpu: device class gpus.nvidia.com does not exist",
    }
    waiting = TwinObject.objects.get(kind="Pod", name="cel-error").body
    assert waiting["status"]["phase"] == "Pending" and "nodeName" not in waiting["spec"]
    assert waiting["status"]["conditions"][0]["message"] == (
        'running "DynamicResources" filter plugin: claim dra-cel/cel-error: selector #0: '
        "CEL runtime error: no such key: nvlinkDomain"
    )


def test_without_its_device_class_a_claim_waits_until_the_class_appears():
    objects, hardware, plugin_configs = scenarios.read("dra")
    objects = [
        o
        for o in dra_allocate.unallocated(objects)
        if not (o["kind"] == "DeviceClass" and o["metadata"]["name"] == "gpu.nvidia.com")
    ]
    TwinGateway().load(objects + cel.objects(), hardware, plugin_configs)
    pod = TwinObject.objects.get(kind="Pod", name="h100-or-l4").body
    assert pod["status"]["phase"] == "Pending"
    condition = pod["status"]["conditions"][0]
    assert condition["reason"] == "Unschedulable"
    nodes = TwinObject.objects.filter(kind="Node").count()
    assert condition["message"] == (
        f"0/{nodes} nodes are available: request gpus: device class gpu.nvidia.com does not exist. "
        f"no new claims to deallocate, preemption: 0/{nodes} nodes are available: {nodes} Preemption is not "
        "helpful for scheduling."
    )


def test_a_scenario_listing_no_device_class_has_the_classes_nvidias_chart_installs():
    """Exported without its cluster-scoped kinds: the driver's chart installed NVIDIA's
    classes, so the claims are allocated by them (a whole GPU for gpu.nvidia.com)."""
    objects, hardware, plugin_configs = scenarios.read("dra")
    objects = [o for o in dra_allocate.unallocated(objects) if o["kind"] != "DeviceClass"]
    TwinGateway().load(objects + cel.objects(), hardware, plugin_configs)
    got = cel.outcome(_bodies("ResourceClaim"), _bodies("Pod"))
    assert got["h100-or-l4"] == {"node": cel.NODE, "devices": cel.EXPECTED["h100-or-l4"]}
    assert got["backtrack"] == {"node": cel.NODE, "devices": cel.EXPECTED["backtrack"]}
    assert got["no-class"]["error"] == "request gpu: device class gpus.nvidia.com does not exist"
