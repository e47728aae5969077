"""Elastic quota on the real Kueue (v0.17, run by the lab): two Workspaces approved through the
console with a guarantee of 4 each on 8 GPUs of one type. B idle, A runs 8 (borrows 4, its Jobs
admitted by Kueue and their pods Running on KWOK nodes); B submits 4 and Kueue takes A's
borrowed GPUs back (reclaimWithinCohort). The quota page, the Workspace's history, A's owner and
B's pods show each state, followed by the cluster watcher as deployed (`manage.py
watch_cluster`, its own process on the test database), with no read of Kueue by the beat; the
test prints how long each took against the 2 s goal. Then an eviction that ends between two
publications is still recorded, once, and the beat's catch-up read adds nothing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from django.core.management import call_command
from django.test import Client

from brickadmin.cluster import kueue
from brickadmin.cluster.base import ClusterError

from .conftest import REPO, _exists, ensure_release_namespace, make_node, wait_until

# the watcher is another process: it reads what the test commits (the Workspace records)
pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

A, B = "lab-kq-a", "lab-kq-b"
GPU = "nvidia.com/gpu"
COHORT = "brick-gpu-exclusive"
NODES = ("lab-kq-gpu-1", "lab-kq-gpu-2")  # 4 GPUs each
PIN = "brick.test/kueue-lab"  # the scenario's Jobs run on its own nodes
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
WAIT = 240  # a loaded CI machine: conditions, never sleeps
# The goal is that the quota page shows what Kueue holds within 2 s of the cluster holding it:
# the test prints each delay for the benchmarks guide, and fails only when the page does not
# follow at all (no beat runs here, so only the watcher can bring it; a loaded CI machine is slow).
GOAL = 2.0
PAGE_DEADLINE = 30.0
LEASE = ("--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")
FIGURES: list[tuple[str, float]] = []


def text(html: bytes) -> str:
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html.decode(), flags=re.DOTALL)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def cluster_queue(lab, workspace: str) -> dict:
    return lab.admin._request("GET", f"{KUEUE}/clusterqueues/brick-ws-{workspace}")


def reserved(lab, workspace: str) -> tuple[int, int]:
    """(quota reserved, of it borrowed) of the Workspace's GPU, as Kueue's status says."""
    for flavor in (cluster_queue(lab, workspace).get("status") or {}).get("flavorsReservation") or []:
        for r in flavor.get("resources") or []:
            if r.get("name") == GPU:
                return int(r.get("total") or 0), int(r.get("borrowed") or 0)
    return 0, 0


def workloads(lab, ns: str) -> list[dict]:
    return lab.admin._request("GET", f"{KUEUE}/namespaces/{ns}/workloads").get("items") or []


def is_true(obj: dict, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def running(lab, ns: str) -> int:
    return sum(1 for p in lab.admin.list_pods(ns) if (p.get("status") or {}).get("phase") == "Running")


def wait_running(lab, ns: str, n: int, what: str) -> None:
    """Until ``n`` pods of ``ns`` are Running; on a timeout, what the pods and Jobs say."""
    try:
        wait_until(lambda: running(lab, ns) == n, WAIT, what)
    except AssertionError as e:
        pods = [
            (p["metadata"]["name"], (p.get("status") or {}).get("phase"), (p.get("status") or {}).get("conditions"))
            for p in lab.admin.list_pods(ns)
        ]
        jobs = [
            (j["metadata"]["name"], j["spec"].get("suspend"), j.get("status"))
            for j in lab.admin._request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
        ]
        events = [
            (x["involvedObject"]["name"], x.get("reason"), x.get("message"))
            for x in lab.admin._request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
        ]
        raise AssertionError(f"{e}\npods: {pods}\njobs: {jobs}\nevents: {events[-30:]}") from None


def submit(lab, ns: str, name: str, pods: int) -> None:
    """A Job of ``pods`` pods of one GPU each, as its owner would apply it: no queue name (the
    namespace's LocalQueue ``default`` is Kueue's default for it)."""
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {
                # KWOK completes a Job's pod as soon as it runs; these run until deleted
                # (lab/kwok.yaml), as training that holds its GPUs does
                "metadata": {"annotations": {"brick.cloud/kwok-runs": "until-deleted"}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {PIN: "true"},
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {GPU: "1"}},
                        }
                    ],
                },
            },
        },
    }
    lab.admin._request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=body)


def remove(lab, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
    try:
        lab.admin.delete(api_version, kind, name, namespace)
    except ClusterError:
        pass


def clear(lab) -> None:
    """What an earlier run left: its namespaces, its ClusterQueues, and any product ClusterQueue
    of the cohort whose Workspace namespace is gone (it would lend the cohort idle GPUs)."""
    for ns in (A, B):
        remove(lab, "v1", "Namespace", ns)
    for q in lab.admin._request("GET", f"{KUEUE}/clusterqueues").get("items") or []:
        name = q["metadata"]["name"]
        ws = (q["metadata"].get("labels") or {}).get("brick.cloud/workspace", "")
        if (q.get("spec") or {}).get("cohortName") == COHORT and (
            ws in (A, B) or (ws and not _exists(lab, f"/api/v1/namespaces/{ws}"))
        ):
            remove(lab, "kueue.x-k8s.io/v1beta2", "ClusterQueue", name)
    for ns in (A, B):
        wait_until(lambda ns=ns: not _exists(lab, f"/api/v1/namespaces/{ns}"), WAIT, f"namespace {ns} to go")
        # Kueue holds a ClusterQueue (its finalizer) until its Workloads are gone; one whose
        # Workload was deleted while it waited can stay counted pending in Kueue's cache and
        # hold it for good: after a while the leftover is let go
        path = f"{KUEUE}/clusterqueues/brick-ws-{ns}"
        try:
            wait_until(lambda path=path: not _exists(lab, path), 60, f"ClusterQueue of {ns} to go")
        except AssertionError:
            lab.admin._request(
                "PATCH", path, content_type="application/merge-patch+json", body={"metadata": {"finalizers": None}}
            )
            wait_until(lambda path=path: not _exists(lab, path), WAIT, f"ClusterQueue of {ns} to go")


class Watcher:
    """`manage.py watch_cluster` as deployed, against the lab, publishing into the test database."""

    def __init__(self, kubeconfig: str, log):
        from tests.gpus.conftest import database_url

        self.log = log
        env = {
            **os.environ,
            "BRICK_CLUSTER": "kube",
            "BRICK_KUBECONFIG": kubeconfig,
            "DATABASE_URL": database_url(),
            "BRICK_VAR_DIR": str(log.parent / "watcher-var"),
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env.pop("PROMETHEUS_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "watch_cluster", "--identity", "kueue-lab", "--debounce", "0.2", *LEASE],
            cwd=REPO,
            env=env,
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)


@pytest.fixture
def cohort_of_two(lab, settings):
    """Two KWOK nodes of 4 GPUs each, and the console pointed at the lab."""
    assert _exists(lab, f"{KUEUE}"), "Kueue is not served by the lab (lab/up runs it)"
    ensure_release_namespace(lab)  # the watcher's Lease lives there
    clear(lab)
    for node in NODES:
        make_node(lab, node, labels={PIN: "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
        gpus = {GPU: "4", "cpu": "32", "memory": "128Gi", "pods": "110"}
        lab.admin._request(
            "PATCH",
            f"/api/v1/nodes/{node}/status",
            content_type="application/merge-patch+json",
            body={"status": {"capacity": gpus, "allocatable": gpus}},
        )
    settings.BRICK_CLUSTER, settings.BRICK_KUBECONFIG = "kube", lab.kubeconfig
    settings.BRICK_SNAPSHOT_CACHE_SECONDS = 0
    settings.PROMETHEUS_URL = ""
    yield lab
    clear(lab)
    for node in NODES:
        remove(lab, "v1", "Node", node)


def approve(admin_client, user, name: str) -> None:
    """Requested by ``user`` and approved on the approval queue: guarantee 4, burst 4, lend 4."""
    from workspaces import approvals as ws_approvals
    from workspaces.models import WorkspaceRequest

    req = ws_approvals.create_request(user, name=name, gpu=4, cpu=4, memory_gib=8, storage_gib=10)
    p = f"r{req.pk}"
    r = admin_client.post(
        f"/workspaces/approvals/{req.pk}/approve/",
        {f"{p}-resource": GPU, f"{p}-guarantee": 4, f"{p}-burst": 4, f"{p}-lend": 4, f"{p}-overcommit": "on"},
    )
    assert r.status_code == 302, text(r.content)[:3000]
    assert WorkspaceRequest.objects.get(pk=req.pk).status == "approved"


def page_shows(admin_client, what: str, rows: dict[str, str], since: float, watcher: Watcher) -> str:
    """Open the quota page until it shows ``rows`` (Workspace -> its row's figures), at most
    PAGE_DEADLINE after ``since``, when the cluster held the state: the watcher follows Kueue,
    nobody reads it for the page. Prints how long after the cluster the page showed it."""
    page, opened = "", 0
    while True:
        began = time.monotonic()
        page = text(admin_client.get(f"/workspaces/cluster/{A}/quota/").content)
        delay, opened = time.monotonic() - since, opened + 1
        if all(f"{ws} {GPU} {figures}" in page for ws, figures in rows.items()):
            break
        if delay > PAGE_DEADLINE:
            raise AssertionError(
                f"the quota page did not show {what} {rows} within {PAGE_DEADLINE}s of the cluster:\n"
                f"{page[:3000]}\nthe watcher:\n{watcher.output()}"
            )
        time.sleep(0.05)
    FIGURES.append((what, delay))
    print(
        f"[kueue lab] {what}: the quota page showed it {delay:.2f}s after the cluster "
        f"(opened {opened} times, the last took {time.monotonic() - began:.2f}s)"
        + ("" if delay <= GOAL else f", over the {GOAL:.0f} s goal")
    )
    return page


def recorded(n: int, since: float, what: str) -> float:
    """Until the watcher's publications have recorded ``n`` evictions of A (at most PAGE_DEADLINE
    after ``since``); how long after."""
    from workspaces.models import Decision

    rows = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED, subject=A)
    wait_until(lambda: rows.count() >= n, PAGE_DEADLINE, f"{n} evictions of {A} recorded ({what})", interval=0.05)
    delay = time.monotonic() - since
    FIGURES.append((f"{what}: recorded", delay))
    return delay


@pytest.fixture
def watcher(cohort_of_two, tmp_path):
    """The cluster watcher running as in a deployment, once it has published the view."""
    from gpus.models import ViewState

    call_command("watch_cluster", "--once")  # a watcher of an earlier run, killed, holds no Lease now
    w = Watcher(cohort_of_two.kubeconfig, tmp_path / "watcher.log")
    before = ViewState.objects.get(pk=1).generation
    try:
        wait_until(lambda: ViewState.objects.get(pk=1).generation > before, WAIT, "the watcher's first publication")
        yield w
    finally:
        w.stop()


def test_kueue_takes_back_what_a_borrowed_and_every_page_says_so(cohort_of_two, watcher, admin_client, alice, bob):
    from brickadmin.accounts.models import Notification
    from gpus.models import OwnerNotice
    from workspaces.models import Decision, KueueFacts, WorkspaceRequest

    lab = cohort_of_two
    approve(admin_client, alice, A)
    approve(admin_client, bob, B)

    # What the console wrote, as the real Kueue holds it: accepted and active
    for ws in (A, B):
        q = wait_until(
            lambda ws=ws: is_true(cluster_queue(lab, ws), "Active") and cluster_queue(lab, ws), WAIT, "Active"
        )
        assert q["apiVersion"] == "kueue.x-k8s.io/v1beta2" and q["spec"]["cohortName"] == COHORT
        (res,) = q["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        assert [str(res[k]) for k in ("nominalQuota", "borrowingLimit", "lendingLimit")] == ["4", "4", "4"]
        lq = lab.admin._request("GET", f"{KUEUE}/namespaces/{ws}/localqueues/default")
        wait_until(
            lambda ws=ws: is_true(lab.admin._request("GET", f"{KUEUE}/namespaces/{ws}/localqueues/default"), "Active"),
            WAIT,
            f"LocalQueue of {ws} Active",
        )
        assert lq["spec"]["clusterQueue"] == f"brick-ws-{ws}"
    # the flavor: the labels every node serving the GPU shares (the lab's other scenarios may
    # have such nodes too, of another product: then none)
    flavor = lab.admin._request("GET", f"{KUEUE}/resourceflavors/{COHORT}")
    assert flavor["spec"].get("nodeLabels") == kueue.flavor_node_labels(lab.admin.list_nodes(), GPU)

    # 1. Both idle: each guaranteed 4, nothing borrowed or lent. From here on nobody reads Kueue
    # for the pages but the watcher (what the approval read is dropped)
    KueueFacts.objects.all().delete()
    page_shows(admin_client, "both idle", {A: "4 0 0 0 4 4 0", B: "4 0 0 0 4 4 0"}, time.monotonic(), watcher)

    # 2. B idle, A runs 8: 4 of its own and 4 borrowed from B
    for i in range(4):
        submit(lab, A, f"train-{i}", 2)
    t0 = time.monotonic()
    wait_until(lambda: reserved(lab, A) == (8, 4), WAIT, "Kueue to admit A's 8 GPUs, 4 borrowed")
    wait_running(lab, A, 8, "A's 8 pods Running on the KWOK nodes")
    since = time.monotonic()
    FIGURES.append(("A's 8 pods Running after its Jobs were submitted", since - t0))
    jobs = lab.admin._request("GET", f"/apis/batch/v1/namespaces/{A}/jobs")["items"]
    assert {j["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") for j in jobs} == {"default"}
    assert all(is_true(w, "Admitted") for w in workloads(lab, A))
    page = page_shows(
        admin_client, "A borrows 4 of B's idle guarantee", {A: "4 8 4 0 4 4 0", B: "4 0 0 4 4 4 0"}, since, watcher
    )
    assert f"Cohort {COHORT}: 8 guaranteed across 2 Workspaces, 4 borrowed now, 0 idle" in page

    # 3. B submits 4 within its guarantee: Kueue preempts what A borrowed
    submit(lab, B, "eval", 4)
    t0 = time.monotonic()
    wait_running(lab, B, 4, "B's 4 pods Running")
    wait_until(lambda: reserved(lab, A) == (4, 0), WAIT, "A back to its guarantee")
    wait_running(lab, A, 4, "A's preempted pods gone")
    since = time.monotonic()
    FIGURES.append(("B's 4 pods Running after its Job was submitted (Kueue preempting A)", since - t0))
    preempted = [w for w in workloads(lab, A) if is_true(w, "Preempted")]
    assert len(preempted) == 2, [w["metadata"]["name"] for w in workloads(lab, A)]
    assert {next(c["reason"] for c in w["status"]["conditions"] if c["type"] == "Preempted") for w in preempted} == {
        "InCohortReclamation"
    }
    page = page_shows(
        admin_client, "B took its guarantee back", {A: "4 4 0 0 4 4 2", B: "4 4 0 0 4 4 0"}, since, watcher
    )

    # the history: one row per preempted Workload, by Kueue, for B, written from the watcher's view
    recorded(2, since, "B took its guarantee back")
    rows = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED, subject=A)
    assert rows.count() == 2 and {r.actor_name for r in rows} == {"Kueue"}
    assert {r.amount for r in rows} == {2} and {r.gpu_resource for r in rows} == {GPU}
    for r in rows:
        assert f"Kueue took back 2 {GPU} borrowed by Job/train-" in r.detail and f"for Workspace {B}" in r.detail
    history = text(admin_client.get(f"/workspaces/cluster/{A}/").content)
    assert history.count(f"Kueue took back 2 {GPU} borrowed by Job/train-") >= 2, history[:3000]
    # A's owner is told, on their page and by a notification; B's owner is not
    assert OwnerNotice.objects.filter(namespace=A, actor_name="Kueue").count() == 2
    assert Notification.objects.filter(recipient=alice, kind="kueue-evicted").count() == 2
    assert not Notification.objects.filter(recipient=bob, kind="kueue-evicted").exists()
    owner = Client()
    owner.force_login(alice)
    mine = text(owner.get(f"/workspaces/{WorkspaceRequest.objects.get(name=A).pk}/").content)
    assert f"Kueue took back 2 {GPU}" in mine

    # 4. B's Job ends: A's preempted Jobs get quota again. Kueue keeps the eviction only as
    # "Previously: ..." and a count; read again, it is the same two rows
    remove(lab, "batch/v1", "Job", "eval", B)
    wait_until(lambda: reserved(lab, A) == (8, 4), WAIT, "A's preempted Jobs admitted again")
    wait_running(lab, A, 8, "A's 8 pods Running again")
    page_shows(admin_client, "A borrows again", {A: "4 8 4 0 4 4 0"}, time.monotonic(), watcher)
    assert Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED, subject=A).count() == 2

    # 5. An eviction that starts and ends at once: B takes its guarantee back and lets it go. Whether
    # a publication caught the eviction or only its end (Kueue's "Previously: ..." and its count),
    # each is recorded once
    submit(lab, B, "eval-2", 4)
    wait_until(
        lambda: (
            sum(
                e.get("count", 0)
                for w in workloads(lab, A)
                for e in ((w.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
            )
            == 4
        ),
        WAIT,
        "Kueue to preempt A's borrowed Jobs again",
    )
    remove(lab, "batch/v1", "Job", "eval-2", B)

    def all_admitted_again():
        mine = workloads(lab, A)
        return (
            len(mine) == 4
            and all(is_true(w, "QuotaReserved") and not is_true(w, "Evicted") for w in mine)
            and reserved(lab, A) == (8, 4)
        )

    wait_until(all_admitted_again, WAIT, "A's Jobs all admitted again, nothing evicted any more")
    recorded(4, time.monotonic(), "an eviction that ended between two publications")
    # the beat's catch-up read finds nothing new: each eviction is recorded once
    from workspaces import elastic

    elastic.read_kueue()
    elastic.read_kueue()
    rows = Decision.objects.filter(action=Decision.Action.KUEUE_EVICTED, subject=A)
    assert rows.count() == 4, [r.detail for r in rows]
    assert all(f"for Workspace {B}" in r.detail for r in rows)
    assert Notification.objects.filter(recipient=alice, kind="kueue-evicted").count() == 4

    print("[kueue lab] figures: " + "; ".join(f"{what} {s:.2f}s" for what, s in FIGURES))
