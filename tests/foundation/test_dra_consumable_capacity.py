"""What an allocation consumes of a shared device's capacities (KEP-5075), as the scheduler
computes it: the tables of k8s.io/dynamic-resource-allocation's consumed-capacity tests
(structured/internal/experimental/consumable_capacity_test.go), and what that means for
NVIDIA's consumable shares on whole GPUs and on static MIG devices."""

from decimal import Decimal

import pytest

from brickadmin.cluster import dra, dra_allocate
from tests import dra_objects as ex


def policy(default=None, min=None, max=None, step=None, values=None):
    p: dict = {}
    if default is not None:
        p["default"] = default
    if min is not None or max is not None or step is not None:
        p["validRange"] = {k: v for k, v in (("min", min), ("max", max), ("step", step)) if v is not None}
    if values is not None:
        p["validValues"] = values
    return p


# testCalculateConsumedCapacity: (requested, capacity value, requestPolicy, consumed)
CALCULATE = {
    "empty": (None, "1", {}, "1"),
    "min in range": (None, "2", policy(default="1", min="1"), "1"),
    "default in set": (None, "2", policy(default="1", values=["1"]), "1"),
    "more than min in range": ("2", "2", policy(default="1", min="1"), "2"),
    "less than min in range": ("1", "2", policy(default="1", min="2"), "2"),
    "with step (round up)": ("2", "3", policy(default="1", min="1", step="2"), "3"),
    "with step (no remaining)": ("2", "2", policy(default="1", min="1", step="1"), "2"),
    "valid value in set": ("2", "3", policy(default="1", values=["1", "2", "3"]), "2"),
    "set (round up)": ("2", "3", policy(default="1", values=["1", "3"]), "3"),
    "larger than set": ("3", "3", policy(default="1", values=["1", "2"]), "3"),
}


@pytest.mark.parametrize("case", CALCULATE, ids=list(CALCULATE))
def test_what_one_allocation_consumes_of_a_capacity(case):
    requested, value, request_policy, consumed = CALCULATE[case]
    capacity = {"value": value, "requestPolicy": request_policy}
    assert dra.consumed_by_request(capacity, requested) == Decimal(consumed)


# testViolateCapacityRequestPolicy: (amount, requestPolicy, violates)
VIOLATES = {
    "no constraint": ("1", None, False),
    "less than maximum": ("1", policy(default="1", min="1", max="2"), False),
    "more than maximum": ("2", policy(default="1", min="1", max="1"), True),
    "in set": ("1", policy(default="1", values=["1"]), False),
    "not in set": ("2", policy(default="1", values=["1"]), True),
}


@pytest.mark.parametrize("case", VIOLATES, ids=list(VIOLATES))
def test_an_amount_outside_the_request_policy(case):
    amount, request_policy, violates = VIOLATES[case]
    assert dra.violates_policy(Decimal(amount), request_policy) is violates


def test_every_capacity_is_consumed_the_requested_the_default_or_without_a_policy_whole():
    """get-consumed-capacity-from-request: each capacity consumes 1 here, "dummy" (no policy, not
    requested) its whole value; a request for a capacity the device lacks cannot have it."""
    device = {
        "capacity": {
            "capacity-0": {"value": "2", "requestPolicy": policy(default="2", min="1")},
            "capacity-1": {"value": "2", "requestPolicy": policy(default="1", min="1")},
            "dummy": {"value": "1"},
        }
    }
    assert dra.consumed_capacity(device, {"capacity-0": "1", "dummy": "1"}) == {
        "capacity-0": Decimal(1),
        "capacity-1": Decimal(1),
        "dummy": Decimal(1),
    }
    assert dra.consumed_capacity(device, {"capacity-2": "1"}) is None


def shared_static_mig(option: str) -> list[dict]:
    """An A100 cut into 7 x 1g.10gb, published with --consumable-shares=<option> (the driver
    applies it to static MIG devices as to whole GPUs: a policy on memory and shares only)."""
    devices = [
        dra.apply_consumable_shares(ex.static_mig(0, ex.GPU_M0, f"MIG-{i}", "1g.10gb", i), option, True)
        for i in range(7)
    ]
    return [ex.rslice("node-a100-mig", "sh4r3", devices)]


@pytest.mark.parametrize("option", ["4", "unlimited", "memory"])
def test_a_static_mig_device_with_consumable_shares_takes_one_claim(option):
    """Its multiprocessors, engines and memory slices have no requestPolicy: a claim that asks
    none of them consumes each whole (fillEmptyRequest), so a second claim never fits."""
    sl = shared_static_mig(option)
    (gpu,) = dra.logical_capacity(sl)
    assert (gpu.mode, gpu.units) == ("shared", 7)
    claims = [
        ex.claim(f"c-{i}", "team-a", [ex.exact("mig", dra.DEVICE_CLASS_MIG)], None, [], None, f"u-{i}")
        for i in range(8)
    ]
    assert dra_allocate.allocate(claims[:7], sl, "node-a100-mig", []) is not None
    assert dra_allocate.allocate(claims, sl, "node-a100-mig", []) is None  # 8 claims, 7 devices


def test_a_whole_gpu_with_consumable_shares_takes_its_shares():
    sl = ex.shares_node()
    units = {c.gpu: c.units for c in dra.logical_capacity(sl)}
    assert units == {ex.GPU_S0: 4, ex.GPU_S1: 4}
    claims = [
        ex.claim(f"c-{i}", "team-a", [ex.exact("gpu", dra.DEVICE_CLASS_GPU)], None, [], None, f"u-{i}")
        for i in range(9)
    ]
    node = str(sl[0]["spec"]["nodeName"])
    given = dra_allocate.allocate(claims[:8], sl, node, [])
    assert given is not None and len({r[0]["device"] for r in given}) == 2
    assert all(r[0]["consumedCapacity"]["shares"] == "1" for r in given)
    assert dra_allocate.allocate(claims, sl, node, []) is None  # a ninth share is not there
