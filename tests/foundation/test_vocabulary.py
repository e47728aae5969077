"""The shared Kubernetes vocabulary: each rule on plain dicts, then the drain parity of the
twin and the real gateway over the same pods (tests/foundation/drain_pods.py)."""

from __future__ import annotations

import copy

import pytest

from brickadmin.cluster import vocabulary as v
from brickadmin.cluster.base import Forbidden, NotFound, TransientClusterError
from brickadmin.cluster.kube import KubeGateway
from brickadmin.cluster.twin import TwinGateway
from tests.foundation import drain_pods as fx


def pod(labels=None, annotations=None, owners=None, phase="Running", volumes=None, ns="ns"):
    md = {"name": "p", "namespace": ns, "labels": labels or {}}
    if annotations:
        md["annotations"] = annotations
    if owners is not None:
        md["ownerReferences"] = owners
    return {"metadata": md, "spec": {"volumes": volumes or []}, "status": {"phase": phase}}


# --- names ------------------------------------------------------------------------------


def test_names_are_the_kubernetes_spellings():
    assert v.GPU == "nvidia.com/gpu" and v.GPU_SHARED == "nvidia.com/gpu.shared"
    assert v.MIG_PREFIX == "nvidia.com/mig-" and v.NVIDIA_PREFIX == "nvidia.com/"
    assert v.SHARING_LABEL == "brick.cloud/gpu.sharing" and v.GPU_TYPE_LABEL == "brick.cloud/gpu.type"
    assert v.DEVICE_PLUGIN_CONFIG_LABEL == "nvidia.com/device-plugin.config"
    assert v.GPU_REPLICAS_LABEL == "nvidia.com/gpu.replicas"
    assert v.CONTROL_PLANE_LABEL == "node-role.kubernetes.io/control-plane"
    assert v.MIRROR_ANNOTATION == "kubernetes.io/config.mirror"
    assert v.RESTARTED_AT_ANNOTATION == "kubectl.kubernetes.io/restartedAt"
    assert v.quota_key(v.GPU_SHARED) == "requests.nvidia.com/gpu.shared"
    assert v.ksm_resource(v.GPU_SHARED) == "nvidia_com_gpu_shared"
    assert v.ksm_resource("nvidia.com/mig-1g.10gb") == "nvidia_com_mig_1g_10gb"


def test_old_import_paths_still_work():
    from brickadmin.cluster import deviceplugin as dp
    from brickadmin.cluster import kube, twin
    from gpus import manifest
    from gpus.numbers import ledger
    from gpus.procedures import steps

    assert steps.GPU_SHARED == ledger.GPU_SHARED == dp.GPU_SHARED == v.GPU_SHARED
    assert steps.SHARING_LABEL == ledger.SHARING_LABEL == manifest.SHARING_LABEL == v.SHARING_LABEL
    assert steps.TYPE_LABEL == ledger.GPU_TYPE_LABEL == twin.GPU_NODE_LABEL == v.GPU_TYPE_LABEL
    assert kube.MIRROR_ANNOTATION == steps.MIRROR == v.MIRROR_ANNOTATION
    assert kube.RESTARTED_AT == manifest.RESTARTED_AT == v.RESTARTED_AT_ANNOTATION
    assert dp.PLUGIN_NAMESPACE == manifest.NAMESPACE == v.PLUGIN_NAMESPACE
    assert dp.CONFIG_KEY == manifest.CONFIG_KEY == v.PLUGIN_CONFIG_KEY
    assert kube._escape is steps.esc is v.json_pointer_escape
    assert twin.requirement_matches is v.requirement_matches
    assert dp.tolerates is v.tolerates and dp.matches_selector is v.labels_match


# --- drain decision ---------------------------------------------------------------------

DS_CONTROLLER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}
DS_NOT_CONTROLLER = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds"}


@pytest.mark.parametrize(
    "p, decision",
    [
        (pod(), v.EVICT),
        (pod(annotations={v.MIRROR_ANNOTATION: "x"}), v.SKIP_MIRROR),
        (pod(owners=[DS_CONTROLLER]), v.SKIP_DAEMONSET),
        (pod(owners=[DS_NOT_CONTROLLER]), v.EVICT),
        (pod(owners=[{**DS_CONTROLLER, "controller": False}]), v.EVICT),
        (pod(owners=[{"kind": "ReplicaSet", "controller": True}, DS_NOT_CONTROLLER]), v.EVICT),
        (pod(owners=[{"kind": "Job", "controller": False}, DS_CONTROLLER]), v.SKIP_DAEMONSET),
        (pod(annotations={v.MIRROR_ANNOTATION: ""}, owners=[DS_CONTROLLER]), v.SKIP_MIRROR),
        (pod(phase="Succeeded"), v.EVICT),  # terminal pods are the caller's business
        (pod(owners=[DS_CONTROLLER], phase="Succeeded"), v.EVICT),  # "Any finished pod can be removed"
        (pod(owners=[DS_CONTROLLER], phase="Failed"), v.EVICT),
        # kubectl's isControllerRefDaemonSet wants kind *and* apiVersion apps/v1
        (pod(owners=[{**DS_CONTROLLER, "apiVersion": "extensions/v1beta1"}]), v.EVICT),
    ],
)
def test_drain_decision(p, decision):
    assert v.drain_decision(p) == decision


# kubectl's own drain table (k8s.io/kubectl pkg/cmd/drain/drain_test.go TestDrain), flag by
# flag: (case, pod, flags, delete?, fatal?). "fatal" is kubectl's "cannot delete ...", which
# stops the whole drain; the rest go or stay (with a warning where kubectl prints one).
RC = {"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "controller": True}
RS = {"apiVersion": "v1", "kind": "ReplicaSet", "name": "rs", "controller": True}
JOB = {"apiVersion": "v1", "kind": "Job", "name": "job", "controller": True}
SCRATCH = [{"name": "scratch", "emptyDir": {"medium": ""}}]
NO_FLAGS = v.DrainFlags(force=False, ignore_daemonsets=False, delete_emptydir_data=False)
FORCE = NO_FLAGS._replace(force=True)
IGNORE_DS = NO_FLAGS._replace(ignore_daemonsets=True)
KUBECTL_DRAIN_TABLE = [
    ("RC-managed pod", pod(owners=[RC]), NO_FLAGS, True, False),
    ("DS-managed pod", pod(owners=[DS_CONTROLLER]), NO_FLAGS, False, True),
    ("DS-managed terminated pod", pod(owners=[DS_CONTROLLER], phase="Succeeded"), NO_FLAGS, True, False),
    ("orphaned DS-managed pod", pod(), NO_FLAGS, False, True),
    ("orphaned DS-managed pod with --force", pod(), FORCE, True, False),
    ("DS-managed pod with --ignore-daemonsets", pod(owners=[DS_CONTROLLER]), IGNORE_DS, False, False),
    (
        "DS-managed pod with emptyDir with --ignore-daemonsets",
        pod(owners=[DS_CONTROLLER], volumes=SCRATCH),
        IGNORE_DS,
        False,
        False,
    ),
    (
        "Job-managed pod with local storage",
        pod(owners=[JOB], volumes=SCRATCH),
        FORCE._replace(delete_emptydir_data=True),
        True,
        False,
    ),
    ("Job-managed terminated pod", pod(owners=[JOB], volumes=SCRATCH, phase="Succeeded"), NO_FLAGS, True, False),
    ("RS-managed pod", pod(owners=[RS]), NO_FLAGS, True, False),
    ("naked pod", pod(), NO_FLAGS, False, True),
    ("naked pod with --force", pod(), FORCE, True, False),
    ("pod with EmptyDir", pod(volumes=SCRATCH), FORCE, False, True),
    ("terminated pod with emptyDir", pod(volumes=SCRATCH, phase="Failed"), NO_FLAGS, True, False),
    (
        "pod with EmptyDir and --delete-emptydir-data",
        pod(volumes=SCRATCH),
        FORCE._replace(delete_emptydir_data=True),
        True,
        False,
    ),
]


@pytest.mark.parametrize("case, p, flags, delete, fatal", KUBECTL_DRAIN_TABLE, ids=[c[0] for c in KUBECTL_DRAIN_TABLE])
def test_kubectls_drain_table(case, p, flags, delete, fatal):
    listed = v.drain_list([p], flags)
    assert bool(listed.delete) == delete
    assert bool(listed.errors) == fatal


def test_kubectls_drain_warnings():
    """The warnings kubectl prints (its test's expectWarning), by filter."""
    orphan_forced = v.drain_list([pod()], FORCE)
    assert orphan_forced.warnings == {"deleting Pods that declare no controller": ["ns/p"]}
    ds_scratch = v.drain_list([pod(owners=[DS_CONTROLLER], volumes=SCRATCH)], IGNORE_DS)
    assert ds_scratch.warnings == {"ignoring DaemonSet-managed Pods": ["ns/p"]} and ds_scratch.skipped
    assert v.drain_list([pod()], NO_FLAGS).errors == {
        "ns/p": "cannot delete Pods that declare no controller (use --force to override)"
    }
    assert v.drain_list([pod(owners=[DS_CONTROLLER])], NO_FLAGS).errors == {
        "ns/p": "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
    }


def test_a_daemonset_pod_whose_daemonset_is_gone():
    """kubectl's daemonSetFilter: the GET of the DaemonSet says NotFound. Without --force that
    is an error; with --force the orphan is deleted (the filters after it drop the warning, as
    kubectl's own TODO there says)."""
    orphan = pod(owners=[DS_CONTROLLER])
    refused = v.pod_delete_status(orphan, NO_FLAGS, daemonset=False)
    assert (refused.delete, refused.reason, refused.message) == (False, v.DRAIN_ERROR, 'daemonsets.apps "ds" not found')
    assert v.pod_delete_status(orphan, FORCE, daemonset=False) == (True, v.DRAIN_OKAY, "")


@pytest.mark.parametrize("age, delete", [(0, True), (1, True), (100, False)])
def test_kubectls_skip_deleted_filter(age, delete):
    """TestSkipDeletedFilter: --skip-wait-for-delete-timeout=20 leaves a pod deleted long ago."""
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    p = pod(owners=[RS])
    if age:
        stamp = (now - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
        p["metadata"]["deletionTimestamp"] = stamp
    flags = v.PRODUCT_DRAIN._replace(skip_wait_for_delete_timeout=20)
    assert v.pod_delete_status(p, flags, now=now).delete == delete


def test_drain_decision_for_an_orphaned_or_unreadable_daemonset():
    orphan = pod(owners=[DS_CONTROLLER])
    assert v.drain_decision(orphan, daemonset=False) == v.EVICT
    assert v.drain_decision(orphan, daemonset='daemonsets.apps "ds" is forbidden') == v.BLOCKED


def test_pod_facts():
    assert v.is_terminal(pod(phase="Succeeded")) and v.is_terminal(pod(phase="Failed"))
    assert not v.is_terminal(pod()) and not v.is_terminal({"metadata": {}})
    assert v.uses_emptydir(pod(volumes=[{"name": "a", "configMap": {}}, {"name": "b", "emptyDir": {}}]))
    assert not v.uses_emptydir(pod(volumes=[{"name": "a", "configMap": {}}]))
    assert v.pod_key(pod()) == "ns/p"


# kube-scheduler's view of a node's pods: its pod informer's field selector
# (pkg/scheduler/scheduler.go newPodInformer: status.phase!=Succeeded,status.phase!=Failed) and
# assignedPod (pkg/scheduler/eventhandlers.go: spec.nodeName set) decide which pods NodeInfo.AddPod
# (pkg/scheduler/framework/types.go) counts against the node's allocatable.
@pytest.mark.parametrize(
    "node, phase, holds, waits",
    [
        ("n1", "Running", True, False),
        ("n1", "Pending", True, False),  # bound, its image still being pulled
        ("n1", "Unknown", True, False),  # the node stopped reporting: still counted there
        ("n1", "Succeeded", False, False),
        ("n1", "Failed", False, False),  # refused by the kubelet, or ended
        ("", "Pending", False, True),  # not placed yet
        ("", "Failed", False, False),
    ],
)
def test_what_the_scheduler_counts_on_a_node(node, phase, holds, waits):
    p = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": node}, "status": {"phase": phase}}
    assert (v.holds_node_resources(p), v.waits_for_a_node(p)) == (holds, waits)


def test_the_steps_count_what_the_drain_still_has_to_move():
    from gpus.procedures.steps import _evictable

    assert _evictable(pod())
    assert _evictable(pod(owners=[DS_NOT_CONTROLLER]))  # was skipped before: kubectl drain evicts it
    assert not _evictable(pod(owners=[DS_CONTROLLER]))
    assert not _evictable(pod(annotations={v.MIRROR_ANNOTATION: "x"}))
    assert not _evictable(pod(phase="Succeeded")) and not _evictable(pod(phase="Failed"))
    assert _evictable(pod(owners=[DS_CONTROLLER]), {("ns", "ds"): False})  # an orphan: the drain moves it


# --- selectors --------------------------------------------------------------------------


def test_labels_match_is_equality_only():
    assert v.labels_match({"a": "1", "b": "2"}, {"a": "1"})
    assert not v.labels_match({"a": "1"}, {"a": "2"}) and not v.labels_match({}, {"a": ""})
    assert v.labels_match({}, {}) and v.labels_match({}, None)
    assert v.labels_match({"a": ""}, {"a": ""})


@pytest.mark.parametrize(
    "expr, labels, ok",
    [
        ({"key": "t", "operator": "In", "values": ["a", "b"]}, {"t": "b"}, True),
        ({"key": "t", "operator": "In", "values": ["a", "b"]}, {"t": "c"}, False),
        ({"key": "t", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "t", "operator": "NotIn", "values": ["a"]}, {"t": "b"}, True),
        ({"key": "t", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "t", "operator": "NotIn", "values": ["a"]}, {"t": "a"}, False),
        ({"key": "t", "operator": "Exists"}, {"t": ""}, True),
        ({"key": "t", "operator": "Exists"}, {}, False),
        ({"key": "t", "operator": "DoesNotExist"}, {}, True),
        ({"key": "t", "operator": "DoesNotExist"}, {"t": "x"}, False),
        ({"key": "t", "operator": "Gt", "values": ["1"]}, {"t": "2"}, False),
    ],
)
def test_match_expressions(expr, labels, ok):
    assert v.selector_matches(labels, {"matchExpressions": [expr]}) is ok


def test_selector_ands_labels_and_expressions():
    sel = {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    assert v.selector_matches({"app": "x", "tier": "db"}, sel)
    assert not v.selector_matches({"app": "x"}, sel) and not v.selector_matches({"tier": "db"}, sel)
    assert v.selector_matches({"anything": "1"}, {})


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("a=b", {"matchLabels": {"a": "b"}}),
        ("a==b, c", {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "Exists"}]}),
        ("a!=b", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}),
        (
            "a in (x, y),!z",
            {
                "matchExpressions": [
                    {"key": "a", "operator": "In", "values": ["x", "y"]},
                    {"key": "z", "operator": "DoesNotExist"},
                ]
            },
        ),
        ("a notin (x)", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}),
        ("", {}),
    ],
)
def test_parse_label_selector(text, parsed):
    assert v.parse_label_selector(text) == parsed


@pytest.mark.parametrize(
    "selector, labels, ok",
    [
        (None, {}, True),
        ("brick.cloud/gpu.sharing in (timeslicing)", {"brick.cloud/gpu.sharing": "timeslicing"}, True),
        ("brick.cloud/gpu.sharing!=timeslicing", {}, True),
        ("brick.cloud/gpu.sharing!=timeslicing", {"brick.cloud/gpu.sharing": "timeslicing"}, False),
        ("a=1,a=2", {"a": "1"}, False),
        ("a=1,b", {"a": "1"}, False),
        ("!b", {"a": "1"}, True),
        ("a notin (1,2)", {"a": "3"}, True),
    ],
)
def test_label_selector_strings(selector, labels, ok):
    assert v.label_selector_matches(labels, selector) is ok


def test_selector_terms_keep_commas_inside_sets():
    assert v.split_selector_terms("a in (x,y),b=c") == ["a in (x,y)", "b=c"]


def test_tolerations():
    gpu = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
    assert v.tolerates([gpu], [{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert v.tolerates([gpu], [{"operator": "Exists"}])
    assert not v.tolerates([gpu], [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}])
    assert not v.tolerates([{**gpu, "value": "x"}], [{"key": "nvidia.com/gpu", "value": "y"}])
    assert v.tolerates([{**gpu, "value": "x"}], [{"key": "nvidia.com/gpu", "value": "x"}])
    assert v.tolerates([{"key": "k", "effect": "PreferNoSchedule"}], [])
    assert v.tolerates([{"key": v.UNSCHEDULABLE_TAINT_KEY, "effect": "NoSchedule"}], [])  # cordon
    assert not v.tolerates([gpu], None)


# --- PodDisruptionBudgets ---------------------------------------------------------------


def pdb(selector, ns="ns", **spec):
    return {"metadata": {"name": "b", "namespace": ns}, "spec": {**spec, "selector": selector}}


def test_pdb_selection():
    p = pod(labels={"app": "x", "tier": "db"})
    assert v.pdb_selects(pdb({"matchLabels": {"app": "x"}}), p)
    assert v.pdb_selects(pdb({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}), p)
    assert not v.pdb_selects(pdb({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}), p)
    assert not v.pdb_selects(pdb({"matchLabels": {"app": "x"}}, ns="other"), p)
    assert v.pdb_selects(pdb({}), p)  # policy/v1: an empty selector selects the whole namespace
    assert not v.pdb_selects({"metadata": {"namespace": "ns"}, "spec": {}}, p)  # no selector: none
    budgets = [pdb({"matchLabels": {"app": "x"}}), pdb({"matchLabels": {"app": "y"}})]
    assert v.pdbs_for(p, budgets) == budgets[:1]


def ready(p, status="True"):
    p["status"]["conditions"] = [{"type": "Ready", "status": status}]
    return p


def test_disruptions_allowed_counts_ready_selected_pods():
    """Healthy is Ready (not merely Running), selected, in the budget's namespace; the full
    controller arithmetic is in test_disruption.py."""
    sel = {"matchLabels": {"app": "x"}}
    running = [
        ready(pod(labels={"app": "x"})),
        ready(pod(labels={"app": "x"})),
        ready(pod(labels={"app": "y"})),
        pod(labels={"app": "x"}, phase="Pending"),
        ready(pod(labels={"app": "x"}, ns="other")),
        ready(pod(labels={"app": "x"}), "False"),
        pod(labels={"app": "x"}),
    ]
    assert v.disruptions_allowed(pdb(sel, minAvailable=1), running) == 1
    assert v.disruptions_allowed(pdb(sel, minAvailable=2), running) == 0
    # maxUnavailable counts from the pods' controllers' scale: pods without one allow nothing
    assert v.disruptions_allowed(pdb(sel, maxUnavailable=1), running) == 0
    assert v.disruptions_allowed(pdb(sel), running) == 0


# --- JSON pointer ---------------------------------------------------------------------


def test_json_pointer_escape():
    assert v.json_pointer_escape("nvidia.com/gpu") == "nvidia.com~1gpu"
    assert v.json_pointer_escape("a~b/c") == "a~0b~1c"  # '~' first, or '/' -> '~1' -> '~01'
    assert v.json_pointer_escape("plain") == "plain"


# --- the time-slicing config ----------------------------------------------------------

TS_CONFIG = """version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""


def cm(name=v.TS_CONFIGMAP, text=TS_CONFIG, kind="ConfigMap"):
    return {"kind": kind, "metadata": {"name": name}, "data": {v.PLUGIN_CONFIG_KEY: text}}


def test_time_slicing_parser():
    assert v.parse_plugin_config(None) == {} and v.parse_plugin_config("") == {}
    assert v.parse_plugin_config({"a": 1}) == {"a": 1}
    assert v.time_slicing(TS_CONFIG)["renameByDefault"] is True
    assert v.time_slicing_replicas(TS_CONFIG) == 4
    assert v.time_slicing_replicas("version: v1\n") is None
    assert v.time_slicing_replicas({"sharing": {"timeSlicing": {"resources": [{"name": "other"}]}}}) is None
    assert v.time_slicing_replicas({"sharing": {"timeSlicing": {"resources": [{"name": v.GPU}]}}}) == 1
    assert v.time_slicing_replicas({"sharing": {"timeSlicing": {"resources": [{"name": v.GPU, "replicas": "x"}]}}}) == 0


def test_configmap_replicas_and_its_callers():
    from brickadmin.cluster import deviceplugin as dp
    from gpus import manifest
    from gpus.numbers import ledger

    assert v.configmap_replicas([cm("other"), cm()]) == 4
    assert v.configmap_replicas([cm("other")]) is None
    assert v.configmap_replicas([cm(kind="Secret")]) is None
    assert v.configmap_replicas([{"metadata": {"name": v.TS_CONFIGMAP}, "data": {}}]) is None
    # each caller keeps its own answer for "absent"
    assert ledger.brick_replicas([cm()]) == 4 and ledger.brick_replicas([]) == 1
    assert manifest.ts_replicas([cm()]) == 4 and manifest.ts_replicas([]) is None
    gpus = [{"uuid": "a"}, {"uuid": "b", "mig": ["1g.10gb"]}]
    assert dp.advertised_resources(gpus, TS_CONFIG) == {v.GPU_SHARED: 4, "nvidia.com/mig-1g.10gb": 1}
    assert dp.advertised_resources(gpus, TS_CONFIG.replace("renameByDefault: true", "renameByDefault: false")) == {
        v.GPU: 4,
        "nvidia.com/mig-1g.10gb": 1,
    }
    assert dp.advertised_resources(gpus, "version: v1\n") == {v.GPU: 2}


# --- drain parity: the twin and the real gateway over the same pods --------------------------


class StandInApi(KubeGateway):
    """KubeGateway with its HTTP replaced by a tiny API server over the fixtures: the drain
    code runs unchanged. Eviction: vocabulary.eviction_refusal, the Eviction API's decision."""

    def __init__(self, pods, pdbs, daemonset_error=None):  # no super(): no kubeconfig, no transport
        self.daemonset_error = daemonset_error
        self.pods = {v.pod_key(p): copy.deepcopy(p) for p in pods}
        for i, p in enumerate(self.pods.values()):
            p["metadata"].setdefault("uid", f"uid-{i}")  # the API server gives every object one
        self.budgets = copy.deepcopy(list(pdbs))
        self.cordoned = False

    def cordon(self, node):
        self.cordoned = True

    def list_pods(self, namespace=None, label_selector=None, field_selector=None):
        assert field_selector == f"spec.nodeName={fx.NODE}"
        return [copy.deepcopy(p) for p in self.pods.values()]

    def get_daemonset(self, namespace, name):
        if self.daemonset_error:
            raise self.daemonset_error
        if (namespace, name) != (fx.NS, fx.DS):
            raise NotFound(f'daemonsets.apps "{name}" not found', status=404)
        return fx.daemonset()

    def get_pod(self, namespace, name):
        try:
            return copy.deepcopy(self.pods[f"{namespace}/{name}"])
        except KeyError:
            raise NotFound("gone", status=404) from None

    def _request(self, method, path, *, body=None, **kw):
        assert method == "POST" and path.endswith("/eviction"), path
        key = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
        target = self.pods[key]
        refusal = v.eviction_refusal(target, self.budgets)
        if refusal:
            raise TransientClusterError(refusal.message, status=refusal.status, reason=refusal.reason)
        for b in v.pdbs_for(target, self.budgets):  # the API server decrements the budget it used
            if not (v.eviction_ignores_budgets(target) or v.unready_pod_passes(target, b)):
                b["status"] = v.status_after_eviction(b["status"], target["metadata"]["name"])
        del self.pods[key]
        return {}


def _twin_drain(ds_uid="ds-uid", delete_emptydir_data=True):
    pods = fx.pods(ds_uid)
    gw = TwinGateway()
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fx.NS}},
        fx.node(),
        fx.daemonset(ds_uid),
        *pods.values(),
        *fx.pdbs(),
    ]
    gw.load(objects, {})
    result = gw.drain(fx.NODE, delete_emptydir_data=delete_emptydir_data, timeout_seconds=5)
    return result, {v.pod_key(p): p for p in pods.values()}, gw


def test_kube_drain_answers_from_the_shared_decision():
    pods = fx.pods()
    api = StandInApi(pods.values(), fx.pdbs())
    result = api.drain(fx.NODE, timeout_seconds=2)
    got = fx.answers(result, {v.pod_key(p): p for p in pods.values()})
    assert got == fx.EXPECTED
    assert api.cordoned and not result.done
    assert "disruption budget" in result.blocked[f"{fx.NS}/guarded-expr"]


@pytest.mark.django_db
def test_twin_drain_gives_the_real_gateways_answers():
    result, by_key, gw = _twin_drain()
    got = fx.answers(result, by_key)
    assert got == fx.EXPECTED
    assert not result.done
    assert result.blocked[f"{fx.NS}/guarded-expr"] == (
        "Cannot evict pod as it would violate the pod's disruption budget. "
        "The disruption budget by-expressions needs 1 healthy pods and has 1 currently"
    )
    left = {p["metadata"]["labels"][fx.ROLE] for p in gw.list_pods(field_selector=f"spec.nodeName={fx.NODE}")}
    assert left == {role for role, a in got.items() if a != "evicted"}


@pytest.mark.django_db
def test_twin_and_kube_agree_pod_by_pod():
    twin_result, by_key, _ = _twin_drain()
    kube_result = StandInApi(fx.pods().values(), fx.pdbs()).drain(fx.NODE, timeout_seconds=2)
    assert fx.answers(twin_result, by_key) == fx.answers(kube_result, by_key)


@pytest.mark.django_db
def test_a_pod_kubectl_may_not_delete_stops_the_drain_before_any_eviction():
    """kubectl drain without --delete-emptydir-data: "cannot delete Pods with local storage",
    and nothing on the node is evicted (the filters run before the first eviction)."""
    pods = fx.pods()
    api = StandInApi(pods.values(), fx.pdbs())
    kube = api.drain(fx.NODE, delete_emptydir_data=False, timeout_seconds=2)
    twin, by_key, gw = _twin_drain(delete_emptydir_data=False)
    for result in (kube, twin):
        assert result.evicted == [] and not result.done
        assert result.blocked == {
            f"{fx.NS}/scratch": "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
        }
    assert len(api.pods) == len(pods)
    assert len(gw.list_pods(field_selector=f"spec.nodeName={fx.NODE}")) == len(pods)


def test_a_daemonset_the_drain_cannot_read_stops_it_before_any_eviction():
    pods = fx.pods()
    api = StandInApi(pods.values(), fx.pdbs(), daemonset_error=Forbidden('daemonsets.apps "parity-ds" is forbidden'))
    result = api.drain(fx.NODE, timeout_seconds=2)
    assert result.evicted == [] and len(api.pods) == len(pods)
    # every running pod whose DaemonSet it had to read (kubectl GETs each one)
    assert result.blocked == {
        v.pod_key(pods[role]): 'cannot delete daemonsets.apps "parity-ds" is forbidden'
        for role in ("daemonset-controller", "daemonset-orphan")
    }


def test_daemonset_pods_tolerate_the_node_conditions_the_controller_adds_by_itself():
    from brickadmin.cluster import vocabulary as v

    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        assert v.tolerates([{"key": key, "effect": "NoExecute"}], [])
    assert v.tolerates([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], [])
    assert not v.tolerates([{"key": "brick.cloud/dedicated", "value": "llm", "effect": "NoSchedule"}], [])
