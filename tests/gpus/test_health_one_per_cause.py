"""One finding per cause: a node a stopped conversion left cordoned, with the old mode's
resource still in its status, is listed once, as the stopped run (resume or restore it), not
also as "cordoned, uncordon it" and "stale resource, patch it"; findings with causes of
their own stay. On plain in-memory snapshots, then through the pages on the twin."""

import re
from collections import Counter

import pytest
from django.urls import reverse

from gpus.models import ProcedureRun
from gpus.numbers import health, ledger
from tests.foundation.inmemory import GPU, SHARED, gpu_pod, node, snapshot


def everything(snap, stopped_runs=()):
    """Every check, those of the cluster and those of the records, on one set of inputs."""
    return health.problems(health.HealthInputs(ledger.compute(snap), snap, stopped_runs=list(stopped_runs)))


def triples(problems):
    return [(p.subject, p.kind, p.severity) for p in problems]


def half_converted(name="ts-1", *, allocatable=2):
    """Procedure A stopped after relabelling: cordoned, the time-slicing plugin serving, the
    exclusive resource still in the status (allocatable or only in capacity)."""
    return node(
        name, sharing="timeslicing", physical=2, resources={SHARED: (8, 8), GPU: (2, allocatable)}, unschedulable=True
    )


def stopped_a(name="ts-1", pk=7):
    return ProcedureRun(pk=pk, procedure="A", node=name, status="failed")


def test_a_node_a_stopped_run_left_cordoned_is_listed_once_as_that_run():
    problems = everything(snapshot([half_converted()]), [(stopped_a(), True)])
    assert triples(problems) == [("ts-1", "run-left-cordoned", "warn")]
    assert problems[0].link == reverse("run_detail", args=[7])


def test_a_stale_resource_left_only_in_capacity_is_also_the_runs_to_finish():
    problems = everything(snapshot([half_converted(allocatable=0)]), [(stopped_a(), True)])
    assert triples(problems) == [("ts-1", "run-left-cordoned", "warn")]


def test_without_a_stopped_run_the_cordon_and_the_stale_resource_are_two_causes():
    problems = everything(snapshot([half_converted()]))
    assert triples(problems) == [("ts-1", "stale-allocatable", "bad"), ("ts-1", "cordoned", "info")]


def test_a_run_stopped_on_another_node_explains_nothing_here():
    problems = everything(snapshot([half_converted(), node("ex-1")]), [(stopped_a("ex-1"), True)])
    assert sorted(triples(problems)) == [
        ("ex-1", "run-left-cordoned", "warn"),
        ("ts-1", "cordoned", "info"),
        ("ts-1", "stale-allocatable", "bad"),
    ]


def test_a_cause_of_its_own_on_the_same_node_stays_listed():
    """A pod the kubelet refused is its own finding (its owner must recreate it); the mistyped
    label stays the one reason the node has no plugin."""
    refused = gpu_pod("ws-a", "train-0", "ts-1", resource=SHARED, amount=2, phase="Failed")
    refused["status"] = {"phase": "Failed", "reason": "UnexpectedAdmissionError"}
    snap = snapshot([half_converted()])
    snap.failed_gpu_pods = [refused]
    problems = everything(snap, [(stopped_a(), True)])
    assert sorted(triples(problems)) == [("ts-1", "pod-admission-failed", "bad"), ("ts-1", "run-left-cordoned", "warn")]

    typo = snapshot([node("typo-1", sharing="timesliced", unschedulable=True)], plugin_pods=[])
    assert sorted(triples(everything(typo))) == [("typo-1", "cordoned", "info"), ("typo-1", "label-typo", "bad")]


def test_the_published_words_keep_the_same_findings_in_every_language():
    inputs = health.HealthInputs(ledger.compute(snapshot([half_converted()])), None, stopped_runs=[(stopped_a(), True)])
    words = health.worded(inputs, ["en", "ko"])
    assert [(p.subject, p.kind) for p, _m, _r in words["en"]] == [("ts-1", "run-left-cordoned")]
    assert [(p.subject, p.kind) for p, _m, _r in words["ko"]] == [("ts-1", "run-left-cordoned")]
    assert words["ko"][0][1] != words["en"][0][1]  # the same finding, in Korean


# --- through the pages: Health, the Nodes list's State and the Dashboard card agree ---------


def kinds_of(html, name):
    """The finding kinds on the rows of a page that link to node ``name``."""
    rows = [r for r in re.findall(r"<tr[^>]*>.*?</tr>", html, re.S) if f'href="/nodes/{name}/"' in r]
    return Counter(k for r in rows for k in re.findall(r'data-kind="([^"]+)"', r))


@pytest.mark.django_db
def test_health_nodes_and_the_dashboard_name_a_stopped_runs_node_once(admin_client, load_scenario):
    from gpus.procedures import engine, service

    demo = load_scenario("demo")
    run = service.start_run(
        "B", "gpu-a30-03", {"evictions_acknowledged": 2}, actor_name="root", dispatch=False
    )  # a PDB blocks its drain: the node is left cordoned
    engine.execute(run.pk, demo)
    assert demo.get_node("gpu-a30-03")["spec"].get("unschedulable")

    health_html = admin_client.get(reverse("health")).content.decode()
    assert kinds_of(health_html, "gpu-a30-03") == Counter({"run-left-cordoned": 1})
    nodes_html = admin_client.get(reverse("node_list"), {"model": "NVIDIA A30"}).content.decode()
    assert kinds_of(nodes_html, "gpu-a30-03") == Counter({"run-left-cordoned": 1})

    dash_html = admin_client.get(reverse("dashboard")).content.decode()
    card = re.search(r'data-testid="attention">(.*?)</ul>', dash_html, re.S).group(1)
    card_counts = {k: int(n) for k, n in re.findall(r'data-kind="([^"]+)"><span class="tag \w+">(\d+)</span>', card)}
    health_counts = Counter(re.findall(r'<tr class="problem-[^"]*" data-kind="([^"]+)"', health_html))
    assert card_counts == dict(health_counts)
    assert "gpu-a30-03" in re.search(r'data-kind="run-left-cordoned">.*?</li>', card, re.S).group(0)
