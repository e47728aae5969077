"""What a step and a procedure are. Steps own Kubernetes; the engine owns the rest."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from gpus.numbers.ledger import REPLICATED_MODES

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
    explicit acknowledgement) | info.

    An "ack" check names the plan-page confirmation it needs (``ack``: a Param of the
    procedure declared with ``confirm="ack"``; "" = every such Param), optionally with its
    own checkbox text (``ack_label``) and a number the acknowledgement must cover
    (``ack_count``: the checkbox carries it, and a later count above it is not covered).

    ``detail``, ``fix`` and ``items`` are text or messages (brickadmin/wording.py ``said()``): a
    page or the terminal shows a message in its current language; step 0 of a run records it as
    a message, so each reader of the run reads it in theirs."""

    ok: bool
    detail: str = ""
    fix: str = ""
    level: str = ""
    items: list[str] = field(default_factory=list)
    ack: str = ""
    ack_label: str = ""
    ack_count: int = 0
    capacity: list = field(default_factory=list)  # gpus.numbers.capacity.CapacityLine per GPU type, now and after
    link: str = ""  # where the plan leads for "do X first" (a wizard's page), with ``link_text``
    link_text: str = ""

    def __post_init__(self):
        if not self.level:
            self.level = "ok" if self.ok else "block"

    def asks_for(self, param_name: str) -> bool:
        """Whether this check needs the confirmation ``param_name``."""
        return self.level == "ack" and self.ack in ("", param_name)

    def acknowledged(self, value) -> bool:
        """Whether a confirmation's value covers this check (a count must be at least ours)."""
        if self.ack_count:
            return isinstance(value, int) and not isinstance(value, bool) and value >= self.ack_count
        return bool(value)


class NothingToDo(Exception):
    """A fix whose finding has gone by the time it runs: the run ends as "nothing to do"
    before anything is sent to the cluster."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


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
    wait_knob, wait_default = "BRICK_PROCEDURE_VERIFY_TIMEOUT", 180  # how long a waiting verify may take (s)

    def title(self, run) -> str:
        raise NotImplementedError

    def kubectl(self, run) -> str:
        return ""

    def ensure(self, ctx) -> Outcome:
        return Outcome()

    def verify(self, ctx) -> Check:
        return Check(True)


@dataclass(frozen=True)
class Param:
    """A parameter of a procedure, as the wizard, the plan page and the terminal take it.

    ``field()`` builds the form field that validates it (the same validation for the web
    and ``manage.py procedure``). ``confirm`` says where it is asked: "" on the pick page,
    "always" as a checkbox on the plan page the run cannot start without, "ack" as that
    checkbox only when a pre-check asks for an acknowledgement. ``refusal`` is the message
    when a confirmation is missing; ``cli`` the terminal flag (default ``--<name>``).
    """

    name: str
    field: Callable[[], object]
    confirm: str = ""
    refusal: str = ""
    cli: str = ""
    words: object = ""  # how a run's record names it ("" = its form field's label)

    @property
    def flag(self) -> str:
        return self.cli or "--" + self.name.replace("_", "-")

    @property
    def named(self):
        return self.words or getattr(self.field(), "label", "") or self.name


def mode_name(mode: str) -> str:
    """A GPU node's sharing mode as the pages name it ("Time-slicing"), in the active language."""
    from ..choices import GpuMode

    try:
        return str(GpuMode(mode).label)
    except ValueError:
        return mode


@dataclass
class NodeChoice:
    """A node the pick page lists: ``reason`` says why the procedure does not apply ('' if it does)."""

    name: str
    reason: str = ""
    summary: str = ""


class ProcedureDef:
    """Everything the engine, the pages, the terminal and the locks know about a procedure.

    Subclasses give ``code``, ``label``, ``description`` and ``steps()``; the rest has
    defaults for a procedure that converts one GPU node of the BRICK convention.
    """

    code = ""
    label = ""  # "A. Exclusive → Time-slicing"
    description = ""  # one paragraph on the procedure index and pick page
    action_label = ""  # the button on a node's page ("" = not offered there)
    needs_node = True
    listed = True  # offered on the procedure index as a wizard (False: started from elsewhere, e.g. Restore)
    restorable = False  # a finished run of it may offer "Restore the node" (node_before is recorded)
    restores = False  # it is "Restore the node" (params: restore_of, labels, uncordon)
    restored_labels: tuple[str, ...] = ()  # the node labels its run records for Restore (() = the BRICK ones)
    cluster_wide = False  # takes the cluster-wide lock: runs beside no other run
    checklist = ""  # text of the manual checklist the admin confirms ("" = none)
    params: tuple[Param, ...] = ()
    # The health findings (gpus/health.py kinds) this procedure fixes: a listed procedure is
    # offered there as its wizard, an unlisted one as "Fix" (a plan page, then a run).
    fixes: tuple[str, ...] = ()
    subject_param = ""  # the parameter a finding's subject gives when its facts do not (a Workspace's name)
    # How a run's record names the parameters it keeps beyond its form's ({key: words}); a key in
    # ``unnamed_params`` is kept for the product and not shown among them.
    param_words: dict[str, object] = {}
    unnamed_params: tuple[str, ...] = ()

    def headline(self, run) -> str:
        """What a run of it changed, in words, for its page, the run list and its notices ("" =
        the procedure's label and the run's target)."""
        return ""

    def run_links(self, run) -> list[tuple[str, str, str]]:
        """(url, words, id) a run's page leads to when the run has no node: back to where it
        was started, and its undo when one is offered."""
        return []

    def param_name(self, key: str):
        """A recorded parameter as a person reads it: its label, never its key."""
        declared = next((p for p in self.params if p.name == key), None)
        if declared is not None:
            return declared.named
        return self.param_words.get(key) or key.replace("_", " ")

    def steps(self, params: dict) -> list[Step]:
        raise NotImplementedError

    def prechecks(self, gateway, node: str, params: dict) -> list[Check]:
        return []

    def capacity_change(self, gateway, ledger, snapshot, node: str, params: dict) -> dict[str, int] | None:
        """How the run changes each GPU type's Total ({resource: +/- logical}); None when it
        changes no capacity (its plan shows no capacity table)."""
        return None

    def bind_fields(self, fields: dict, node: str) -> None:
        """Adjust the wizard's form fields to the chosen node ('' when none is chosen yet)."""

    def fixes_finding(self, kind: str, params: dict) -> bool:
        """Whether this procedure fixes a finding of ``kind`` with these facts (its fix params)."""
        return kind in self.fixes

    def confirm_sentence(self, node: str, params: dict) -> str:
        """The one sentence the browser asks before a Fix run starts (data-confirm)."""
        return ""

    def nothing_to_do(self, gateway, node: str, params: dict) -> str:
        """Read live when the run starts: why there is nothing left to do (the finding has
        gone), or '' to go on. The run then ends as "nothing to do" without a write."""
        return ""

    def lock_key(self, node: str) -> str:
        return CLUSTER_LOCK if self.cluster_wide else node

    def eligibility(self, node_view) -> str:
        """'' when the procedure makes sense on this GPU node (a ledger NodeLedger), else the reason."""
        return ""

    def node_choices(self, ledger, snapshot) -> list[NodeChoice]:
        """The nodes the pick page offers (GPU nodes by default), each with why it does not apply."""
        out = []
        for n in ledger.nodes:
            # the mode by its name in the reader's language (GpuMode's label), not its label value
            summary = f"{n.model} · {n.physical} GPU · {mode_name(n.mode)}" + (
                f" ×{n.replicas}" if n.mode in REPLICATED_MODES else ""
            )
            out.append(NodeChoice(n.name, self.eligibility(n), summary))
        return out

    def offered_on(self, node_view) -> bool:
        """Whether a GPU node's page offers this procedure as a button."""
        return False

    def leads_on(self, node_view) -> bool:
        """Whether a GPU node's page offers this procedure first, as its one primary action
        (a node whose GPUs are in MIG mode leads with its MIG layout)."""
        return False

    def pick_facts(self, ledger, snapshot) -> list[tuple[str, object]]:
        """(label, value) lines the pick page shows before the parameters."""
        return []

    def pick_url(self, node: str = "", params: dict | None = None) -> str:
        """The wizard's pick page, with the node chosen and the fields ``params`` names filled in
        (a finding's facts: only those the pick page asks for)."""
        from urllib.parse import urlencode

        from django.urls import reverse

        url = reverse("wizard_pick", args=[self.code])
        asked = {p.name for p in self.pick_params}
        query = {**({"node": node} if self.needs_node and node else {})}
        query.update({k: v for k, v in (params or {}).items() if k in asked and isinstance(v, str) and v})
        return url + "?" + urlencode(query) if query else url

    def fix_url(self, node: str = "", params: dict | None = None) -> str:
        """Where a finding sends the admin: the wizard (node chosen) for a listed procedure,
        else the fix's plan page with the finding's facts as parameters."""
        from urllib.parse import urlencode

        from django.urls import reverse

        if self.listed:
            return self.pick_url(node, params)
        query = {**({"node": node} if self.needs_node and node else {}), **(params or {})}
        return reverse("fix_plan", args=[self.code]) + ("?" + urlencode(query) if query else "")

    @property
    def pick_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.confirm)

    @property
    def confirm_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.confirm)
