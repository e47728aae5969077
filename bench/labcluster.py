"""The Kubernetes lab as the benchmarks point the product at it (``--cluster lab``).

The lab is the one lab/up started under ``$BRICK_LAB_DIR`` (default /tmp/brickadmin-lab): the
product's gateway is its API server (``BRICK_CLUSTER=kube`` with the lab's kubeconfig), its
Prometheus the lab's. Every process the benchmark starts (web, worker, watcher) gets
:func:`product_env`. A benchmark holds the lab's lock (:func:`hold`, lab/lablock.py) for as long
as it runs and loads its scenario with lab/load_scenario.py (:func:`load`), which also removes
what an earlier load or run left (namespaces it approved, node changes).
"""

from __future__ import annotations

import os
import re
import ssl
import sys
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB_DIR = Path(os.environ.get("BRICK_LAB_DIR", "/tmp/brickadmin-lab"))
KUBECONFIG = os.environ.get("BRICK_LAB_KUBECONFIG", str(LAB_DIR / "kubeconfig"))


def chosen(argv: list[str] | None = None) -> bool:
    """``--cluster lab`` on the command line (read before Django is set up: the settings take
    the cluster from the environment)."""
    argv = sys.argv if argv is None else argv
    return "--cluster=lab" in argv or any(
        a == "--cluster" and argv[i + 1 : i + 2] == ["lab"] for i, a in enumerate(argv)
    )


def _lab_path() -> None:
    if str(REPO / "lab") not in sys.path:
        sys.path.insert(0, str(REPO / "lab"))


def lab_module():
    """lab/lab.py (its ports, admin token and components for this ``$BRICK_LAB_DIR``)."""
    _lab_path()
    import lab

    return lab


def env_file() -> dict[str, str]:
    """The ``export NAME=value`` lines lab/up wrote into ``$BRICK_LAB_DIR/env``."""
    path = LAB_DIR / "env"
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                name, value = line[len("export ") :].split("=", 1)
                out[name.strip()] = value.strip()
    return out


# The product's own namespace, as the chart's release namespace: the watcher's Lease lives there.
# Labelled part-of=brickadmin, so a scenario load keeps it (lab/load_scenario.py).
RELEASE_NAMESPACE = "brickadmin"


def product_env(prometheus: bool = False) -> dict[str, str]:
    """What the product's processes need to run against the lab: its API server (and, with
    ``prometheus``, its Prometheus). See :func:`release_namespace` for the watcher."""
    env = {"BRICK_CLUSTER": "kube", "BRICK_KUBECONFIG": KUBECONFIG, "BRICK_LEASE_NAMESPACE": RELEASE_NAMESPACE}
    if prometheus:
        env["PROMETHEUS_URL"] = env_file().get("BRICK_LAB_PROMETHEUS_URL") or lab_module().PROM_URL
    return env


def hold(timeout: float = 600) -> None:
    """Take the lab's lock until this process exits (tests and benchmarks take turns)."""
    _lab_path()
    import lablock

    lablock.hold(timeout)


def load(scenario: str = "demo") -> None:
    """The scenario loaded as lab/load_scenario.py loads it (what was there before removed)."""
    _lab_path()
    import load_scenario

    load_scenario.load(scenario, KUBECONFIG)


def release_namespace() -> None:
    """The product's namespace on the lab, as the chart installs into one (the watcher takes
    its Lease there; without it the watcher waits for a Lease it cannot create)."""
    from brickadmin.cluster.kube import KubeGateway

    KubeGateway(KUBECONFIG).apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": RELEASE_NAMESPACE, "labels": {"app.kubernetes.io/part-of": "brickadmin"}},
        },
        field_manager="brickadmin-bench",
    )


_SAMPLE = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def apiserver_requests() -> Counter:
    """The lab API server's own count of the requests it served since it started
    (``apiserver_request_total`` of its /metrics), per (verb, resource)."""
    lab = lab_module()
    req = urllib.request.Request(lab.API_URL + "/metrics")
    req.add_header("Authorization", f"Bearer {lab.ADMIN_TOKEN_FILE.read_text().strip()}")
    ctx = ssl.create_default_context(cafile=str(lab.PKI / "ca.crt"))
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:  # noqa: S310  (the lab's https URL)
        text = r.read().decode()
    out: Counter = Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            labels = dict(_LABEL.findall(m.group(1)))
            out[(labels.get("verb", ""), labels.get("resource", ""))] += int(float(m.group(2)))
    return out
