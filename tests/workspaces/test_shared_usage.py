"""Honest per-tenant usage: DCGM measures a time-sliced GPU as a whole and NVIDIA's
dcgm-exporter copies the device's figures to every pod on it, so a pod on a time-sliced GPU
gets no utilisation of its own, and a Workspace sharing such GPUs with another Workspace
gets none either and is never found idle from the device's figure; a Workspace whose pods
are the only ones time-slicing a node's GPUs is measured by them whole; a MIG instance is
measured on its own. On the demo twin, with DCGM
readings shaped as dcgm-exporter labels them (UUID, and GPU_I_ID for a MIG instance)."""

import copy
import csv as csv_module
import io
import re
from html import unescape

import pytest
from django.urls import reverse

from brickadmin.cluster.snapshot import take_snapshot
from gpus.numbers import ledger as ledger_mod
from gpus.numbers import occupancy
from gpus.view import publish as view_publish

from .conftest import text

pytestmark = pytest.mark.django_db

# The same device figure for both pods of one time-sliced A30 (what dcgm-exporter reports),
# two MIG instances of one A100 each with its own, two whole GPUs of an exclusive pod.
USAGE = {
    "ws-nlp-lab/bert-notebook": {"GPU-shared-a30": [3.0, 1000.0]},
    "ws-nlp-lab/tokenizer-svc": {"GPU-shared-a30": [3.0, 1000.0]},
    "ws-inference/embed-svc-0": {"GPU-a100-mig/1": [10.0, 500.0]},
    "ws-inference/embed-svc-1": {"GPU-a100-mig/2": [70.0, 900.0]},
    "ws-vision/detector-train": {"GPU-a": [50.0, 100.0], "GPU-b": [30.0, 100.0]},
    "ws-recsys/guest-notebook": {"GPU-shared-a30": [3.0, 1000.0]},
    "ws-notebooks/jupyter-bob": {"GPU-h100-4": [20.0, 800.0]},
    "ws-notebooks/jupyter-erin": {"GPU-h100-4": [20.0, 800.0]},
}


@pytest.fixture
def measured_demo(load_scenario):
    gw = load_scenario("demo")
    snap = take_snapshot(gw, use_prometheus=False)
    # another Workspace's pod time-slicing the same A30 node as ws-nlp-lab's two
    guest = copy.deepcopy(next(p for p in snap.gpu_pods if p["metadata"]["name"] == "bert-notebook"))
    guest["metadata"].update(namespace="ws-recsys", name="guest-notebook", uid="guest-notebook-uid")
    snap.gpu_pods.append(guest)
    snap.usage = USAGE
    return snap, ledger_mod.compute(snap)


def test_time_sliced_pods_get_no_figure_of_their_own_and_mig_instances_their_own(measured_demo):
    snap, led = measured_demo
    occ = occupancy.compute(snap, led)
    nlp = {p["name"]: p for p in occ["ws-nlp-lab"].pods}
    assert nlp["bert-notebook"]["time_sliced"] and nlp["bert-notebook"]["utilisation"] is None
    assert nlp["bert-notebook"]["device_utilisation"] == 3.0  # kept apart, shown as the device's
    assert occ["ws-nlp-lab"].utilisation is None and occ["ws-nlp-lab"].memory_mib is None
    mig = {p["name"]: p for p in occ["ws-inference"].pods}
    assert (mig["embed-svc-0"]["utilisation"], mig["embed-svc-1"]["utilisation"]) == (10.0, 70.0)
    assert not mig["embed-svc-0"].get("time_sliced")
    assert occ["ws-inference"].utilisation == 40.0 and occ["ws-vision"].utilisation == 40.0
    # the only Workspace time-slicing its node: the devices' figures are its own, counted once
    assert occ["ws-notebooks"].utilisation == 20.0
    assert {p["name"]: p["utilisation"] for p in occ["ws-notebooks"].pods}["jupyter-bob"] is None
    # under a 5 % threshold the device's 3 % would have called the time-sliced Workspace idle
    assert not occ["ws-nlp-lab"].idle(5) and occ["ws-vision"].idle(50)


def test_the_pages_say_not_measurable_per_tenant_instead_of_the_device_figure(measured_demo, admin_client):
    snap, _led = measured_demo
    admin_client.get(reverse("cluster_workspaces"))  # the twin's view, as a page first reads it
    view_publish.publish(snap)  # then the watcher's, with DCGM's readings
    detail = unescape(admin_client.get(reverse("cluster_workspace", args=["ws-nlp-lab"])).content.decode())
    pods = text(re.search(r'data-testid="ws-pods".*?</table>', detail, re.S).group(0))
    assert "bert-notebook" in pods and "not measurable per tenant (time-sliced GPU) · device 3%" in pods
    assert "3%" not in pods.replace("device 3%", "")
    usage = text(re.search(r'data-testid="ws-utilisation">.*?</dd>', detail, re.S).group(0))
    assert "not measurable per tenant (time-sliced GPU)" in usage
    inference = admin_client.get(reverse("cluster_workspace", args=["ws-inference"])).content.decode()
    assert "not measurable per tenant" not in inference and ">40%<" in inference.replace("\n", "")
    csv = b"".join(admin_client.get(reverse("cluster_workspaces") + "?format=csv&q=ws-nlp-lab").streaming_content)
    assert "not measurable per tenant (time-sliced GPU)" in csv.decode()


def _page_rows(admin_client):
    html = unescape(admin_client.get(reverse("cluster_workspaces")).content.decode())
    table = re.search(r'data-testid="cluster-workspaces".*?</table>', html, re.S).group(0)
    return [
        [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
        for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)
        if "<td" in r
    ]


def _csv_rows(admin_client):
    body = b"".join(admin_client.get(reverse("cluster_workspaces") + "?format=csv").streaming_content).decode()
    return list(csv_module.DictReader(io.StringIO(body)))


def _same_figure(page: str, cell: str, unit: str) -> bool:
    """One DCGM figure as the page shows it (rounded, with its unit, or a phrase) and as the
    CSV holds it (the number to a tenth, the same phrase, or empty where the page says why)."""
    if page.endswith(unit) and page[: -len(unit)].replace(".", "", 1).isdigit():
        return cell != "" and abs(float(page[: -len(unit)]) - float(cell)) <= 0.5
    if page in ("no pod", "no DCGM series"):
        return cell == ""
    return page == cell


def test_the_csv_says_what_the_page_shows_row_by_row_measured_or_not(measured_demo, admin_client):
    snap, _led = measured_demo
    for state in ("not measured", "measured"):
        if state == "measured":
            view_publish.publish(snap)  # the watcher's view, with DCGM's readings
        page, rows = _page_rows(admin_client), _csv_rows(admin_client)
        assert [r[0] for r in page] == [r["workspace"] for r in rows] and len(rows) >= 4
        figures = set()
        for shown, row in zip(page, rows, strict=True):
            assert shown[1] == (row["owner"] or "?")
            assert shown[2].startswith("no record") == (row["record"] == "none (adoptable)")
            assert shown[3].startswith(row["resource"].split(" (")[0] + " ")
            assert shown[4:7] == [row["allocated"], row["requested"], row["physical"]]
            assert _same_figure(shown[7], row["utilisation"], "%"), (state, shown, row)
            assert _same_figure(shown[8], row["memory"], " MiB"), (state, shown, row)
            assert (shown[10] == "in use") == (row["idle_since"] == "")
            figures.add(row["utilisation"])
        if state == "measured":  # numbers and the time-sliced phrase both compared above
            assert "not measurable per tenant (time-sliced GPU)" in figures and "40.0" in figures
        else:
            assert figures == {"not measured"}
