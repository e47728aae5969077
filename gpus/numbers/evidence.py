"""Evidence for the `gpu_sharing` requirement of the CNCF Kubernetes AI Conformance
programme (the cluster shares GPUs by time-slicing or MIG), produced from the live
cluster for either convention (docs/operator-guide.md#node-labels-the-single-source-of-truth):
the commands an auditor would run and their output, stamped with the capture time. Pure
functions over a snapshot, its ledger and the device-plugin ConfigMaps."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from brickadmin.cluster.vocabulary import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    GPU_PRESENT_LABEL,
    NODE_ROLE_PREFIX,
    SHARING_LABEL,
)
from gpus.numbers import ledger as L
from gpus.numbers.words import gettext as _


@dataclass
class Proof:
    title: str
    command: str
    output: str
    shows: str


@dataclass
class Evidence:
    captured_at: datetime
    strategies: list[str]
    partitions_exposed: bool
    oversubscribed: bool
    proofs: list[Proof] = field(default_factory=list)

    @property
    def satisfied(self) -> bool:
        return bool(self.strategies)


def _age(node: dict[str, Any], now: datetime) -> str:
    created = node["metadata"].get("creationTimestamp")
    if not created:
        return "<unknown>"
    try:
        days = (now - datetime.fromisoformat(created.replace("Z", "+00:00"))).days
    except ValueError:
        return "<unknown>"
    return f"{days}d"


def _roles(labels: dict[str, str]) -> str:
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith(NODE_ROLE_PREFIX))
    return ",".join(roles) or "<none>"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows)


def build(snapshot: Any, led: L.Ledger, configmaps: list[dict[str, Any]]) -> Evidence:
    now = snapshot.taken_at
    gpu_names = {n.name for n in led.nodes}
    strategies = []
    if any(n.mode == L.MODE_TIMESLICING and n.sharing_strategy != L.MPS and n.logical for n in led.nodes):
        strategies.append("time-slicing")
    if any(n.sharing_strategy == L.MPS and n.logical for n in led.nodes):
        strategies.append("MPS")
    mig_nodes = [n for n in led.nodes if any(r.gpu_type.startswith("mig-") and r.allocatable for r in n.served)]
    if mig_nodes:
        strategies.append("MIG")
    ts_nodes = [n for n in led.nodes if n.mode in L.REPLICATED_MODES and n.logical]
    oversubscribed = any(n.logical > n.physical for n in ts_nodes)
    ev = Evidence(
        captured_at=now, strategies=strategies, partitions_exposed=bool(mig_nodes), oversubscribed=oversubscribed
    )

    cols = [GPU_PRESENT_LABEL, DEVICE_PLUGIN_CONFIG_LABEL, SHARING_LABEL]
    rows = [["NAME", "STATUS", "ROLES", "AGE", "VERSION", "GPU.PRESENT", "DEVICE-PLUGIN.CONFIG", "GPU.SHARING"]]
    for node in sorted(snapshot.nodes, key=lambda n: n["metadata"]["name"]):
        labels = node["metadata"].get("labels") or {}
        ready = L._ready(node.get("status") or {})
        status = ("Ready" if ready else "NotReady") + (
            ",SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else ""
        )
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        rows.append(
            [node["metadata"]["name"], status, _roles(labels), _age(node, now), version]
            + [labels.get(c, "") for c in cols]
        )
    ev.proofs.append(
        Proof(
            _("Sharing strategy per node"),
            "kubectl get nodes " + " ".join(f"-L {c}" for c in cols),
            _table(rows),
            _("%(n)d GPU nodes; strategies in use: %(strategies)s.")
            % {"n": len(gpu_names), "strategies": ", ".join(strategies) or _("none")},
        )
    )

    for n in mig_nodes:
        raw = next(x for x in snapshot.nodes if x["metadata"]["name"] == n.name)
        ev.proofs.append(
            Proof(
                _("Hardware partitioning: MIG partitions on %(node)s are schedulable resources") % {"node": n.name},
                f'kubectl get node {n.name} -o jsonpath="{{.status.allocatable}}"',
                json.dumps(
                    dict(sorted((raw.get("status") or {}).get("allocatable", {}).items())), separators=(",", ":")
                ),
                _("%(resources)s exposed as separate schedulable resources.")
                % {
                    "resources": ", ".join(
                        f"{r.resource}: {r.allocatable}" for r in n.served if r.gpu_type.startswith("mig-")
                    )
                },
            )
        )

    for cm in configmaps:
        for key, text in sorted((cm.get("data") or {}).items()):
            if "timeSlicing" in (text or ""):
                ns, name = cm["metadata"].get("namespace", ""), cm["metadata"]["name"]
                esc = key.replace(".", "\\.")
                ev.proofs.append(
                    Proof(
                        _("Software sharing: time-slicing config %(config)s") % {"config": f"{name}/{key}"},
                        f'kubectl get cm {name} -n {ns} -o jsonpath="{{.data.{esc}}}"',
                        text.rstrip(),
                        _("replicas turn one physical GPU into several schedulable units."),
                    )
                )
    for n in ts_nodes:
        res = next(r for r in n.served if r.gpu_type == L.SHARED)
        esc = res.resource.replace(".", "\\.")
        ev.proofs.append(
            Proof(
                _("Software sharing: %(node)s oversubscribes its GPUs") % {"node": n.name},
                f'kubectl get node {n.name} -o jsonpath="{{.status.allocatable.{esc}}}"',
                str(res.allocatable),
                _("%(logical)s logical GPUs advertised on %(physical)s physical (%(source)s).")
                % {"logical": res.allocatable, "physical": n.physical, "source": n.physical_source},
            )
        )

    for n in mig_nodes:
        in_use = [r for r in n.served if r.gpu_type.startswith("mig-") and r.requested]
        if not in_use:
            continue
        lines = [
            "Allocated resources:",
            "  Resource                       Requests   Limits",
            "  --------                       --------   ------",
        ]
        for r in n.served:
            lines.append(f"  {r.resource:<30} {r.requested:<10} {r.requested}")
        ev.proofs.append(
            Proof(
                _("MIG partitions in real use on %(node)s") % {"node": n.name},
                f'kubectl describe node {n.name} | grep -A14 "Allocated resources"',
                "\n".join(lines),
                _("%(partitions)s held by running pods.")
                % {"partitions": ", ".join(f"{r.resource.split('mig-')[1]} ×{r.requested}" for r in in_use)},
            )
        )
    return ev


def as_markdown(ev: Evidence) -> str:
    out = [
        "# gpu_sharing — evidence",
        "",
        f"Captured: {ev.captured_at.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        "",
        f"- At least one GPU sharing strategy: {'yes (' + ', '.join(ev.strategies) + ')' if ev.strategies else 'no'}",
        f"- Hardware partitions exposed as schedulable resources: {'yes' if ev.partitions_exposed else 'no'}",
        f"- Software sharing allows oversubscription: {'yes' if ev.oversubscribed else 'no'}",
        "",
    ]
    for i, p in enumerate(ev.proofs, 1):
        out += [f"## {i}. {p.title}", "", "```", f"$ {p.command}", p.output, "```", "", f"→ {p.shows}", ""]
    return "\n".join(out)
