"""The readiness page: how ready the cluster is to move its GPUs to Dynamic Resource Allocation
(gpus/numbers/dra_readiness.py), from the stored view: 0 API calls, a constant number of queries."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from brickadmin.cluster.deviceplugin import pod_gpu_requests
from brickadmin.permissions import admin_required
from gpus.numbers import dra_readiness
from gpus.view.reading import read_cluster, usage_measured, workspace_rows


def _asks(view) -> list[dra_readiness.PodAsk]:
    """The pods asking for nvidia.com/*: those placed on the GPU nodes (with the Job they belong
    to), then the Workspaces' pods still waiting for a node."""
    asks = []
    for n in view.ledger.nodes:
        for pod in n.raw_pods:
            ask = dra_readiness.pod_ask(pod, pod_gpu_requests(pod))
            if ask is not None:
                asks.append(ask)
    for namespace, pods in workspace_rows("namespace", "pods"):
        for pod in pods or []:
            if pod.get("phase") == "Pending" and not pod.get("node"):
                ask = dra_readiness.pod_ask(
                    {"metadata": {"namespace": namespace, "name": pod.get("name", "")}}, pod.get("requests") or {}
                )
                if ask is not None:
                    asks.append(ask)
    return asks


def _quotas() -> list[dra_readiness.QuotaHard]:
    return [
        (namespace, q.get("name", ""), q.get("hard") or {})
        for namespace, quotas in workspace_rows("namespace", "quotas")
        for q in quotas or []
    ]


@require_GET
@admin_required
def dra_readiness_page(request):
    view = read_cluster()
    # The view keeps no DCGM reading of the pods that use claims: their attribution is not measured here.
    dcgm = dra_readiness.dcgm_attribution(None, {} if usage_measured() else None)
    ready = dra_readiness.readiness(
        _asks(view), _quotas(), dcgm, ((n.name, n.stack, n.model) for n in view.ledger.nodes)
    )
    return render(
        request,
        "gpus/dra_readiness.html",
        {
            "ready": ready,
            "ledger": view.ledger,
            "snapshot": view.snapshot,
            "stacks": [
                (s, ready.nodes_on(s)) for s in (dra_readiness.DEVICE_PLUGIN, dra_readiness.DRA, dra_readiness.BOTH)
            ],
        },
    )
