"""One set of pods for the drain parity tests: the twin, the real gateway's decision (with a
stand-in API server) and the lab all drain these and must answer alike.

Every pod carries a ``parity-role`` label, so answers compare by role even where a
controller names the pod (the DaemonSet's own pod in the lab).
"""

from __future__ import annotations

NS = "drain-parity"
NODE = "parity-node"
DS = "parity-ds"
ROLE = "parity-role"

# role -> what the product's drain (``kubectl drain --ignore-daemonsets --force
# --delete-emptydir-data``) does with it, on every gateway
EXPECTED = {
    "mirror": "skipped",
    "daemonset-controller": "skipped",
    "daemonset-owned-not-controller": "evicted",  # kubectl drain looks at the controller only
    "plain": "evicted",
    "pdb-match-labels": "blocked",
    "pdb-match-expressions": "blocked",
    "pdb-allows": "evicted",
    "emptydir": "evicted",
    "completed": "evicted",  # finished: deleted through the Eviction API, which no budget guards
    "daemonset-finished": "evicted",  # kubectl: "Any finished pod can be removed"
    "daemonset-orphan": "evicted",  # its DaemonSet is gone: deleted with a warning under --force
}
COMPLETED = "completed"
# On a real cluster the DaemonSet controller deletes a finished daemon pod, and the garbage
# collector a pod whose owner is gone, within moments (which is why kubectl meets them
# rarely): the lab cannot hold them still, so only the twin and the stand-in API drain them.
ONLY_SIMULATED = {"daemonset-finished", "daemonset-orphan"}
ORPHAN_DS = "parity-ds-deleted"


def node(labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE, "parity": "yes", **(labels or {})}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "8", "pods": "110"},
            "allocatable": {"cpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def daemonset(uid: str = "ds-uid") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DS, "namespace": NS, "uid": uid},
        "spec": {
            "selector": {"matchLabels": {"app": DS}},
            "template": {
                "metadata": {"labels": {"app": DS, ROLE: "daemonset-controller"}},
                "spec": {
                    "nodeSelector": {"parity": "yes"},
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            },
        },
    }


def _pod(
    name: str,
    role: str,
    *,
    labels: dict | None = None,
    annotations: dict | None = None,
    owners: list | None = None,
    emptydir: bool = False,
    phase: str = "Running",
) -> dict:
    spec = {
        "nodeName": NODE,
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never" if phase in ("Succeeded", "Failed") else "Always",
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    md = {"name": name, "namespace": NS, "labels": {ROLE: role, **(labels or {})}}
    if annotations:
        md["annotations"] = annotations
    if owners:
        md["ownerReferences"] = owners
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": spec,
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": str(phase == "Running")}]},
    }


def ds_owner(uid: str, controller: bool) -> dict:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": DS, "uid": uid, "controller": controller}


def pods(ds_uid: str = "ds-uid", node_uid: str = "node-uid") -> dict[str, dict]:
    """role -> pod. The DaemonSet-controlled pod is what the DaemonSet controller would have made;
    owners carry the owners' real uids on a real cluster (the garbage collector checks them)."""
    return {
        "mirror": _pod(
            "static-web-parity-node",
            "mirror",
            annotations={"kubernetes.io/config.mirror": "3f2a"},
            owners=[{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": True}],
        ),
        "daemonset-controller": _pod(
            f"{DS}-x7k2p", "daemonset-controller", labels={"app": DS}, owners=[ds_owner(ds_uid, True)]
        ),
        "daemonset-owned-not-controller": _pod(
            "ds-sidecar", "daemonset-owned-not-controller", owners=[ds_owner(ds_uid, False)]
        ),
        "plain": _pod("plain", "plain"),
        "pdb-match-labels": _pod("guarded-labels", "pdb-match-labels", labels={"app": "guarded"}),
        "pdb-match-expressions": _pod("guarded-expr", "pdb-match-expressions", labels={"tier": "db"}),
        "pdb-allows": _pod("relaxed", "pdb-allows", labels={"app": "relaxed"}),
        "emptydir": _pod("scratch", "emptydir", emptydir=True),
        COMPLETED: _pod("finished", COMPLETED, phase="Succeeded"),
        "daemonset-finished": _pod(
            f"{DS}-done", "daemonset-finished", labels={"app": DS}, owners=[ds_owner(ds_uid, True)], phase="Succeeded"
        ),
        "daemonset-orphan": _pod(
            f"{ORPHAN_DS}-q4m1z",
            "daemonset-orphan",
            owners=[
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ORPHAN_DS, "uid": "gone", "controller": True}
            ],
        ),
    }


def pdbs() -> list[dict]:
    """The budgets, with the status the disruption controller gives them for the pods above
    (one healthy pod each)."""

    def pdb(name, selector, spec, allowed):
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": NS},
            "spec": {**spec, "selector": selector},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "observedGeneration": 1},
        }

    return [
        pdb("by-labels", {"matchLabels": {"app": "guarded"}}, {"minAvailable": 1}, 0),
        pdb(
            "by-expressions",
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db", "cache"]}]},
            {"minAvailable": 1},
            0,
        ),
        pdb("relaxed", {"matchLabels": {"app": "relaxed"}}, {"minAvailable": 0}, 1),
    ]


def answers(result, pods_by_key: dict[str, dict]) -> dict[str, str]:
    """role -> 'evicted' | 'skipped' | 'blocked' | 'untouched' from a DrainResult."""
    out = {}
    for key, pod in pods_by_key.items():
        role = pod["metadata"]["labels"][ROLE]
        if key in result.evicted:
            out[role] = "evicted"
        elif key in result.skipped:
            out[role] = "skipped"
        elif key in result.blocked:
            out[role] = "blocked"
        else:
            out[role] = "untouched"
    return out
