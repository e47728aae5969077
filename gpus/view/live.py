"""The live read for decisions: how a pre-check, an approval or a fix reads the cluster.

A decision (may this run start, may this Workspace be approved, has this finding gone)
reads the objects it decides on from the cluster as it is now, never from the materialised
view, which is for looking. ``LiveRead`` is the one way it does so. It answers the reads of
the gateway protocol (``get_node``, ``list_pods``, ``list_resource_quotas``, ...), so a
check written against a gateway reads through it unchanged, and adds what decisions ask
for as a whole: the ``ledger()`` (the cluster and Prometheus's DCGM figures, with the
quotas always listed again: a snapshot may come from this process's cache, and quotas are
what approvals change), the Workspace ``owners()`` and Prometheus ``measured()`` figures.

Each read is made once per LiveRead: a pre-check and the checks it calls see one cluster,
and a plan page does not list the same pods three times. Make a new LiveRead for each
decision (a run's pre-check step, a plan page, an approval), and do not change what it
returns (it is shared by the checks of that decision).
"""

from __future__ import annotations

import dataclasses

from brickadmin import metrics
from brickadmin.cluster.gateway import get_gateway
from brickadmin.cluster.snapshot import Snapshot, take_snapshot
from brickadmin.cluster.vocabulary import OWNER_LABEL
from gpus.numbers import ledger as ledger_mod


class LiveRead:
    """The cluster read now for one decision, through ``gateway`` (the configured one by default)."""

    def __init__(self, gateway=None):
        self.gateway = gateway if gateway is not None else get_gateway()
        self.name = self.gateway.name
        self._read: dict = {}

    @classmethod
    def of(cls, cluster) -> LiveRead:
        """``cluster`` itself when it is a LiveRead (the decision's reads so far are kept), else a
        new one over that gateway."""
        return cluster if isinstance(cluster, LiveRead) else cls(cluster)

    def _once(self, what: str, *args, **kwargs):
        key = (what, args, tuple(sorted(kwargs.items())))
        if key not in self._read:  # a read that raised (NotFound) is not kept: asked again, it is read again
            self._read[key] = getattr(self.gateway, what)(*args, **kwargs)
        return self._read[key]

    # --- the gateway's reads ------------------------------------------------------------
    def list_nodes(self, label_selector=None):
        return self._once("list_nodes", label_selector=label_selector)

    def get_node(self, name):
        return self._once("get_node", name)

    def list_pods(self, namespace=None, label_selector=None, field_selector=None):
        return self._once(
            "list_pods", namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )

    def list_gpu_pods(self):
        return self._once("list_gpu_pods")

    def list_priority_classes(self):
        return self._once("list_priority_classes")

    def list_cluster_policies(self):
        return self._once("list_cluster_policies")

    def list_resource_quotas(self, namespace=None):
        return self._once("list_resource_quotas", namespace)

    def list_daemonsets(self, namespace=None, label_selector=None):
        return self._once("list_daemonsets", namespace=namespace, label_selector=label_selector)

    def get_daemonset(self, namespace, name):
        return self._once("get_daemonset", namespace, name)

    def list_configmaps(self, namespace=None, label_selector=None):
        return self._once("list_configmaps", namespace=namespace, label_selector=label_selector)

    def get_configmap(self, namespace, name):
        return self._once("get_configmap", namespace, name)

    def list_namespaces(self, label_selector=None):
        return self._once("list_namespaces", label_selector=label_selector)

    def list_pod_disruption_budgets(self, namespace=None):
        return self._once("list_pod_disruption_budgets", namespace)

    def list_jobs(self, namespace=None, label_selector=None):
        return self._once("list_jobs", namespace=namespace, label_selector=label_selector)

    def gpu_devices(self):
        return self._once("gpu_devices")

    # --- what decisions read as a whole ----------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The cluster's snapshot (with Prometheus's DCGM figures when it answers), its quotas
        listed now."""
        if "snapshot" not in self._read:
            self._read["snapshot"] = dataclasses.replace(
                take_snapshot(self.gateway), quotas=self.list_resource_quotas()
            )
        return self._read["snapshot"]

    def ledger(self) -> ledger_mod.Ledger:
        if "ledger" not in self._read:
            self._read["ledger"] = ledger_mod.compute(self.snapshot())
        return self._read["ledger"]

    def owners(self) -> dict[str, str]:
        """namespace -> the owner its label names ("" when none), for every namespace."""
        return {
            ns["metadata"]["name"]: (ns["metadata"].get("labels") or {}).get(OWNER_LABEL, "")
            for ns in self.list_namespaces()
        }

    def pods_on(self, node: str) -> list[dict]:
        return self.list_pods(field_selector=f"spec.nodeName={node}")

    def pod(self, namespace: str, name: str) -> dict | None:
        pods = self.list_pods(namespace=namespace, field_selector=f"metadata.name={name}")
        return pods[0] if pods else None

    def measured(self, promql: str) -> float | None:
        """A Prometheus figure (None when Prometheus does not answer: ``metrics.last_error()`` says why)."""
        key = ("measured", promql)
        if key not in self._read:
            self._read[key] = metrics.scalar(promql)
        return self._read[key]
