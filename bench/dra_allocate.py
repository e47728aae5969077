"""What the twin's DRA allocator (brickadmin/cluster/dra_allocate.py, dra_cel.py) costs, pure:

- a device's CEL ``device`` variable (attributes, capacities as quantities), which the
  allocator builds once per device and pod;
- one selector (NVIDIA's class and a request's memory and productName test) evaluated on one
  device, compiled once as the scheduler's CEL cache keeps it;
- one pod's claim placed on a node of --gpus GPUs of which all but one are taken (every
  device is checked, the last one fits);
- the search going back: a pod of --gpus requests on a node of --gpus GPUs, where request i
  asks for "memory of at least i" and the GPUs are listed largest first, so first fit gives
  each request the wrong GPU and the search must undo its choices (allocator_stable.go does
  the same search);
- a pod that fits nowhere because of a matchAttribute constraint no two GPUs meet: the whole
  search, every order of the GPUs tried, before the answer.

Each figure is the median of --repeat runs.

    .venv/bin/python bench/dra_allocate.py [--gpus 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from brickadmin.cluster import dra_allocate, dra_cel  # noqa: E402

DRIVER = "gpu.nvidia.com"
CLASS = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
CLASSES = {
    "gpu.nvidia.com": {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [{"cel": {"expression": CLASS}}]}}
}
MEMORY = f"device.capacity['{DRIVER}'].memory"


def gpus(n: int, *, largest_first: bool = False, numa: bool = False) -> list[dict]:
    out = []
    for i in range(n):
        mem = n - i if largest_first else i + 1
        attrs = {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"}}
        if numa:
            attrs["numa"] = {"int": i}
        out.append({"name": f"gpu-{i}", "attributes": attrs, "capacity": {"memory": {"value": f"{mem}Gi"}}})
    return out


def slice_(devices: list[dict]) -> dict:
    spec = {
        "driver": DRIVER,
        "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
    }
    return {"metadata": {"name": "node-1-slice"}, "spec": {**spec, "devices": devices}}


def claim(requests: list[tuple[str, int, str | None]], constraints: list | None = None) -> dict:
    reqs = []
    for name, count, expr in requests:
        exactly: dict = {"deviceClassName": "gpu.nvidia.com", "count": count}
        if expr:
            exactly["selectors"] = [{"cel": {"expression": expr}}]
        reqs.append({"name": name, "exactly": exactly})
    devices: dict = {"requests": reqs}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": devices}}


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    n = a.gpus

    device = gpus(1)[0]
    product = f"device.attributes['{DRIVER}'].productName"
    request = f"{MEMORY}.compareTo(quantity('40Gi')) >= 0 || {product}.startsWith('NVIDIA A100')"
    programs = [dra_cel.compile_selector(CLASS), dra_cel.compile_selector(request)]
    built = timed(lambda: [dra_cel.device_variable(device, DRIVER) for _ in range(1000)], a.repeat) / 1000
    variable = dra_cel.device_variable(device, DRIVER)
    per = timed(lambda: [p.selects(variable) for _ in range(1000) for p in programs], a.repeat) / 2000
    print(f"a device's CEL variable, built once per device and pod: {built * 1e6:.1f} µs")
    print(f"one selector on one device: {per * 1e6:.1f} µs")

    node = slice_(gpus(n))
    taken = [
        {
            "status": {
                "allocation": {"devices": {"results": [{"driver": DRIVER, "pool": "node-1", "device": f"gpu-{i}"}]}}
            }
        }
        for i in range(n - 1)
    ]
    one = [claim([("gpu", 1, f"{MEMORY}.compareTo(quantity('1Gi')) >= 0")])]
    t = timed(lambda: dra_allocate.allocate(one, [node], "node-1", taken, classes=CLASSES), a.repeat)
    print(f"one claim on a node of {n} GPUs, {n - 1} taken: {t * 1e3:.2f} ms")

    node = slice_(gpus(n, largest_first=True))
    stairs = [claim([(f"r{i}", 1, f"{MEMORY}.compareTo(quantity('{i + 1}Gi')) >= 0") for i in range(n)])]
    got: list = []
    t = timed(lambda: got.append(dra_allocate.allocate(stairs, [node], "node-1", [], classes=CLASSES)), a.repeat)
    assert got[-1] is not None
    print(f"{n} requests that need the search to go back, on {n} GPUs: {t * 1e3:.2f} ms")

    node = slice_(gpus(n, numa=True))
    apart = [claim([("gpus", 2, None)], constraints=[{"matchAttribute": f"{DRIVER}/numa"}])]
    t = timed(lambda: got.append(dra_allocate.allocate(apart, [node], "node-1", [], classes=CLASSES)), a.repeat)
    assert got[-1] is None
    print(f"2 GPUs on one NUMA node, none such among {n}: {t * 1e3:.2f} ms (the whole search)")


if __name__ == "__main__":
    main()
