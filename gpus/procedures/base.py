"""What a step and a procedure are. Steps own Kubernetes; the engine owns the rest."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from django.conf import settings

CLUSTER_LOCK = "cluster:timeslicing"  # the lock key of cluster-wide procedures


def knob(name: str, default: float) -> float:
    """A tuning value: settings first, then the environment (so a worker subprocess can
    be told), then the default."""
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name)
    try:
        return float(value) if value is not None and value != "" else default
    except (TypeError, ValueError):
        return default


@dataclass
class Outcome:
    """What ``ensure`` did: ``sent`` is what went to the API server (None: nothing,
    the cluster was already in the target state)."""

    sent: object = None
    output: str = ""

    @property
    def changed(self):
        return self.sent is not None


@dataclass
class Check:
    """A verification or pre-check result. level: ok | warn | block | ack (needs an
    explicit acknowledgement) | info."""

    ok: bool
    detail: str = ""
    fix: str = ""
    level: str = ""
    items: list[str] = field(default_factory=list)

    def __post_init__(self):
        if not self.level:
            self.level = "ok" if self.ok else "block"


class StepFailed(Exception):
    """A step cannot proceed; ``fix`` says what the admin should do."""

    def __init__(self, detail, fix=""):
        super().__init__(detail)
        self.detail = detail
        self.fix = fix


class Step:
    key = ""
    manual = False  # a checklist step the admin confirms
    skip_reason = ""  # recorded as skipped, never executed
    reensure_on_poll = False  # call ensure again while waiting for verify (drain)
    waits = False  # verify may need time on a real cluster (pods start, metrics scrape)

    def title(self, run) -> str:
        raise NotImplementedError

    def kubectl(self, run) -> str:
        return ""

    def ensure(self, ctx) -> Outcome:
        return Outcome()

    def verify(self, ctx) -> Check:
        return Check(True)


class ProcedureDef:
    code = ""
    needs_node = True
    cluster_wide = False  # takes the cluster-wide lock and conflicts with every other active run
    checklist = ""  # non-empty when the procedure has a manual checklist step

    def steps(self, params: dict) -> list[Step]:
        raise NotImplementedError

    def prechecks(self, gateway, node: str, params: dict) -> list[Check]:
        return []

    def lock_key(self, node: str) -> str:
        return node

    def eligibility(self, node_view) -> str:
        """'' when the procedure makes sense on this node, else the reason."""
        return ""
