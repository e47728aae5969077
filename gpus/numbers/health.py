"""Health checks: a registry of pure functions, each from the health inputs (snapshot,
ledger, drift) to problems with their remediation (the troubleshooting table in our own words).

The Dashboard's "Needs attention" card, the Health page and the Nodes list's State column
all read the one list ``problems(inputs)`` returns, so a check added here appears in all three.

To add a check: write one function ``def my_check(inputs: HealthInputs) -> Iterable[Problem]``
decorated with ``@check("my-kind", gettext_lazy("Short title"))``. Nothing else: the card
groups by kind with that title, the Health page lists it, and a problem whose subject is a
node shows on that node's row. If its input is not in the snapshot or the ledger, add it
to ``HealthInputs`` and gather it in ``gpus.view.publish.health_inputs`` (the one place both the
watcher's publish and a live view gather from; effects live there, not here), or, for a check
of the product's records (``reads="records"``), in ``gpus.view.stored.record_problems``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.dra import DRIVER_NAME
from brickadmin.cluster.pluginconfig import plugin_config_errors
from brickadmin.cluster.vocabulary import KubeObject
from gpus.numbers import device_health, words
from gpus.numbers.dra_lines import DYNAMIC_MIG, is_dra_resource
from gpus.numbers.ledger import MPS, PLUGIN_DOWN, REPLICATED_MODES, Ledger, NodeLedger
from gpus.numbers.words import Text, gettext_lazy
from gpus.numbers.words import gettext as _

if TYPE_CHECKING:
    from brickadmin.cluster.snapshot import Snapshot

SEVERITY_ORDER = {"bad": 0, "warn": 1, "info": 2}

# What a problem's subject names: a node (linked to its page), a GPU resource, or an
# object of the managed device-plugin manifest (linked to the Manifest page).
NODE, RESOURCE, MANIFEST = "node", "resource", "manifest"


@dataclass
class Problem:
    severity: str  # bad | warn | info
    kind: str
    subject: str  # node name or resource
    message: str
    remedy: str
    wizard: str = ""  # code of the procedure that fixes it, if any (see fix_url)
    subject_type: str = NODE
    link: str = ""  # a page that deals with it (a run to resume), with link_text
    link_text: str = ""
    # The facts a fix needs (a resource, a pod, a taint), for the procedures that declare they
    # fix this kind (``fixes`` in gpus/procedures/catalogue/); ``fix`` is the code of the
    # unlisted one offered as "Fix" (resolved by ``problems()``).
    fix_params: dict[str, Any] = field(default_factory=dict)
    fix: str = ""

    @property
    def node(self) -> str:
        """The node the problem is about, or ''."""
        return self.subject if self.subject_type == NODE else ""

    @property
    def title(self) -> str:
        entry = REGISTRY.get(self.kind)
        return str(entry.title) if entry else self.kind

    @property
    def subject_url(self) -> str:
        return remedies.subject_url(self)

    @property
    def fix_url(self) -> str:
        """The pick page of the procedure that fixes it (with this node chosen when the
        procedure runs on a node), or ''."""
        return remedies.fix_url(self) if self.wizard else ""

    @property
    def fix_plan_url(self) -> str:
        """The plan page of the fix run that repairs it (with the finding's facts), or ''."""
        return remedies.fix_plan_url(self) if self.fix else ""

    def resolve_fixes(self) -> Problem:
        """Point to the procedures that declare they fix this kind: the first listed one as
        the wizard, the first unlisted one as the Fix."""
        for code, listed, facts in remedies.fixers(self.kind, self.fix_params, self.subject):
            if listed and not self.wizard:
                self.wizard = code
            elif not listed and not self.fix:
                self.fix, self.fix_params = code, facts
        return self


class Remedies(Protocol):
    """What the pages and the procedures offer for a finding: its links and its fixes. The
    numbers name procedures by code only; ``GpusConfig.ready()`` installs the presenter
    (gpus/views/remedies.py) that knows the URLs and the procedure registry."""

    def subject_url(self, problem: Problem) -> str: ...
    def fix_url(self, problem: Problem) -> str: ...
    def fix_plan_url(self, problem: Problem) -> str: ...
    def page_url(self, name: str) -> str: ...
    def fixers(self, kind: str, params: dict[str, Any], subject: str) -> Iterable[tuple[str, bool, dict[str, Any]]]: ...
    def waits_for_checklist(self, run: Any) -> bool: ...


class NoRemedies:
    """Before the presenter is installed (a pure test): no links, no fixes."""

    def subject_url(self, problem: Problem) -> str:
        return ""

    def fix_url(self, problem: Problem) -> str:
        return ""

    def fix_plan_url(self, problem: Problem) -> str:
        return ""

    def page_url(self, name: str) -> str:
        return ""

    def fixers(self, kind: str, params: dict[str, Any], subject: str) -> Iterable[tuple[str, bool, dict[str, Any]]]:
        return ()

    def waits_for_checklist(self, run: Any) -> bool:
        return False


remedies: Remedies = NoRemedies()


def install_remedies(presenter: Remedies) -> None:
    global remedies
    remedies = presenter


@dataclass
class HealthInputs:
    """Everything the checks read, gathered once before they run (gpus.view.reading.health_inputs)."""

    ledger: Ledger
    snapshot: Snapshot | None = None
    drift: list[Any] | None = None  # gpus.manifest.DriftItem list; None when not read
    # The product's own records, for the checks that read them (reads="records"): the last
    # run on each node when it stopped unfinished, with whether that node is cordoned now.
    stopped_runs: list[tuple[Any, bool]] = field(default_factory=list)  # [(ProcedureRun, cordoned)]
    now: datetime | None = None
    # The Workspace records against the view's Workspace lines (workspaces.health.WorkspaceInputs)
    workspaces: object = None
    # When each periodic service last ran ({"reaper": datetime}; none: never ran here), with
    # CONSOLE_UP, since when the console has been looking for them, and how long without a
    # run is too long (the reaper is scheduled every 5 s).
    service_beats: dict[str, datetime] | None = None
    service_late_after: timedelta = timedelta(minutes=2)


@dataclass(frozen=True)
class HealthCheck:
    kind: str
    title: Text
    run: Callable[[HealthInputs], Iterable[Problem]]
    # "cluster": computed from the cluster when the view is published; "records": from the
    # product's own records when a page is read (they change without the cluster changing).
    reads: str = "cluster"
    explain: Text = ""  # the in-app help: symptom, cause, fix in a sentence or two


REGISTRY: dict[str, HealthCheck] = {}


CheckFunction = Callable[[HealthInputs], Iterable[Problem]]


def check(
    kind: str, title: Text, *, reads: str = "cluster", explain: Text = ""
) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check (in definition order) under the kind of problem it reports;
    ``explain`` is its entry on the Help page."""

    def register(fn: CheckFunction) -> CheckFunction:
        REGISTRY[kind] = HealthCheck(kind, title, fn, reads, explain)
        return fn

    return register


def problems(inputs: HealthInputs, *, reads: str | None = None) -> list[Problem]:
    """Every registered check (or those reading ``reads``) on the inputs, worst first, one
    finding per cause (``one_per_cause``)."""
    out: list[Problem] = []
    for entry in REGISTRY.values():
        if reads is None or entry.reads == reads:
            out.extend(p.resolve_fixes() for p in entry.run(inputs))
    return ordered(one_per_cause(out))


# One finding per cause. On one subject, a finding of the kind on the left explains those of
# the kinds on the right: it names their cause and its remedy covers theirs, so listing them
# too would give the same node conflicting advice (uncordon it by hand, or resume the run that
# will uncordon it). Checks that read different inputs cannot see each other, hence this table.
EXPLAINS: dict[str, frozenset[str]] = {
    # A stopped run cordoned the node and had not yet removed the old mode's resource (step 5
    # of A/B): resuming it does both, restoring undoes both. While it is cordoned, no pod is
    # scheduled onto the stale resource, so its risk waits for the run.
    "run-left-cordoned": frozenset({"cordoned", "stale-allocatable", "stale-capacity"}),
    # No DaemonSet selects a mistyped sharing label: the typo is why no plugin runs.
    "label-typo": frozenset({"plugin-missing"}),
}


def one_per_cause(found: Sequence[Problem]) -> list[Problem]:
    """``found`` without the findings another finding on the same subject explains
    (``EXPLAINS``), in the given order: the most specific finding stands for its cause."""
    kinds: dict[tuple[str, str], set[str]] = {}
    for p in found:
        kinds.setdefault((p.subject_type, p.subject), set()).add(p.kind)
    return [
        p for p in found if not any(p.kind in EXPLAINS.get(k, frozenset()) for k in kinds[(p.subject_type, p.subject)])
    ]


def explains_any(found: Sequence[Problem]) -> bool:
    """Whether any of ``found`` is of a kind that may explain others (``EXPLAINS``)."""
    return any(p.kind in EXPLAINS for p in found)


def worded(
    inputs: HealthInputs, languages: list[str], *, reads: str | None = None
) -> dict[str, list[tuple[Problem, str, str]]]:
    """``problems`` in each of ``languages`` (codes; the first is the one the others
    follow): {code: [(problem, message, remedy)]}, the same findings in the same order in
    every language, only their words differ. A check is pure, so one that finds nothing in
    the first language finds nothing in the others and is not run again (most checks,
    most of the time): a healthy cluster costs one language, not all."""
    found: dict[str, list[tuple[Problem, str, str]]] = {code: [] for code in languages}
    for entry in REGISTRY.values():
        if reads is not None and entry.reads != reads:
            continue
        for code in languages:
            with words.override(code):
                said = [(p.resolve_fixes(), str(p.message), str(p.remedy)) for p in entry.run(inputs)]
            if not said:
                break
            found[code].extend(said)
    if languages:  # the same findings in every language: the first decides which stand
        kept = {id(p) for p in one_per_cause([w[0] for w in found[languages[0]]])}
        positions = [i for i, w in enumerate(found[languages[0]]) if id(w[0]) in kept]
        found = {code: [words[i] for i in positions] for code, words in found.items()}
    return {code: sorted(words, key=lambda w: ordered_key(w[0])) for code, words in found.items()}


def ordered_key(p: Problem) -> tuple[int, str, str]:
    return (SEVERITY_ORDER.get(p.severity, 9), p.kind, p.subject)


def ordered(found: list[Problem]) -> list[Problem]:
    return sorted(found, key=ordered_key)


def by_node(found: list[Problem]) -> dict[str, list[Problem]]:
    """node name -> its problems (the Nodes list's State column)."""
    out: dict[str, list[Problem]] = {}
    for p in found:
        if p.node:
            out.setdefault(p.node, []).append(p)
    return out


@dataclass
class Group:
    kind: str
    title: str
    severity: str
    problems: list[Problem]
    total: int | None = None  # set when ``problems`` holds only the first few

    @property
    def count(self) -> int:
        return len(self.problems) if self.total is None else self.total


FIRST_SHOWN = 5  # subjects the Dashboard card names per kind


def summary(found: list[Problem], stored: Sequence[dict[str, Any]] = ()) -> list[Group]:
    """Problems grouped by kind, worst first (the Dashboard card). ``stored``: groups kept
    as data (``summary_data``), which name only their first subjects."""
    groups: dict[str, Group] = {}
    for d in stored:
        entry = REGISTRY.get(d["kind"])
        groups[d["kind"]] = Group(
            d["kind"],
            str(entry.title) if entry else d["kind"],
            d["severity"],
            [
                Problem(d["severity"], d["kind"], subject, "", "", subject_type=subject_type)
                for subject, subject_type in d["first"]
            ],
            total=d["count"],
        )
    for p in found:
        g = groups.get(p.kind)
        if g is None:
            g = groups[p.kind] = Group(p.kind, p.title, p.severity, [])
        elif SEVERITY_ORDER.get(p.severity, 9) < SEVERITY_ORDER.get(g.severity, 9):
            g.severity = p.severity
        g.problems.append(p)
        if g.total is not None:
            g.total += 1
    return sorted(groups.values(), key=lambda g: (SEVERITY_ORDER.get(g.severity, 9), g.kind))


def summary_data(found: list[Problem]) -> list[dict[str, Any]]:
    """The Dashboard card's groups as data to store with the view: per kind, its worst
    severity, its count and its first subjects (words are added when a page shows them)."""
    return [
        {
            "kind": g.kind,
            "severity": g.severity,
            "count": g.count,
            "first": [[p.subject, p.subject_type] for p in g.problems[:FIRST_SHOWN]],
        }
        for g in summary(found)
    ]


# --- the checks ---------------------------------------------------------------------


@check(
    "stale-allocatable",
    gettext_lazy("Stale resource still allocatable"),
    explain=gettext_lazy(
        "The previous mode's resource is still allocatable on a converted node, so the "
        "scheduler can place pods there that the kubelet then refuses. Fix removes it from node "
        "status (the JSON patch of step 6 of A/B); then recreate any pod that failed."
    ),
)
def stale_allocatable(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        for r in n.stale:
            if r.stale_severity == "allocatable":
                yield Problem(
                    "bad",
                    "stale-allocatable",
                    n.name,
                    _(
                        "%(res)s is stale but still allocatable (%(a)d): pods asking for it can be "
                        "scheduled here and fail with UnexpectedAdmissionError."
                    )
                    % {"res": r.resource, "a": r.allocatable},
                    _(
                        "Clean up now: remove it from node status (step 6 of procedure A/B), then "
                        "recreate any pod that failed."
                    ),
                    fix_params={"stale_resource": r.resource},
                )


@check(
    "stale-capacity",
    gettext_lazy("Stale resource left in capacity"),
    explain=gettext_lazy(
        "The previous mode's resource is left in capacity with allocatable 0. Harmless for "
        "scheduling; Fix removes it with the status patch of A/B."
    ),
)
def stale_capacity(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        for r in n.stale:
            if r.stale_severity == "capacity":
                yield Problem(
                    "warn",
                    "stale-capacity",
                    n.name,
                    _("%(res)s is left in capacity (allocatable 0).") % {"res": r.resource},
                    _("Harmless for scheduling; remove it with the status patch of step 6."),
                    fix_params={"stale_resource": r.resource},
                )


@check(
    "label-typo",
    gettext_lazy("Unrecognised sharing label"),
    explain=gettext_lazy(
        "The sharing label is neither none nor timeslicing, so no device plugin serves the "
        "node and it exposes no GPU. The finding opens procedure A or B (the mode the typo "
        "meant) for the node, which drains it before setting the label exactly."
    ),
)
def label_typo(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        if n.convention == "brick" and n.mode == "unlabelled":
            yield Problem(
                "bad",
                "label-typo",
                n.name,
                _("Sharing label value %(v)r is neither none nor timeslicing: no device plugin selects this node.")
                % {"v": n.sharing_label},
                _("Set brick.cloud/gpu.sharing to exactly none or timeslicing (procedure A or B)."),
                fix_params={"sharing": vocab.intended_sharing(n.sharing_label)},
            )


def _refused_config(n: NodeLedger, daemonsets: list[KubeObject], configmaps: list[KubeObject]) -> str:
    """The device plugin's reasons for refusing the config that the DaemonSet selecting this
    node mounts (the ConfigMap as it is now); '' when it would load it."""
    by_name = {cm["metadata"]["name"]: cm for cm in configmaps}
    for ds in daemonsets:
        spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        if not vocab.labels_match(n.labels, spec.get("nodeSelector")):
            continue
        names = [vol["configMap"].get("name") for vol in spec.get("volumes") or [] if "configMap" in vol]
        cm = by_name.get(names[0]) if names else None
        errors = plugin_config_errors((cm.get("data") or {}).get(vocab.PLUGIN_CONFIG_KEY)) if cm else []
        if cm and errors:
            return str(
                _("The plugin refuses ConfigMap %(name)s: %(errors)s")
                % {"name": cm["metadata"]["name"], "errors": "; ".join(errors)}
            )
    return ""


def _why_no_plugin(n: NodeLedger, daemonsets: list[KubeObject]) -> tuple[str, KubeObject | None]:
    """Why a BRICK node has no running device-plugin pod, from the DaemonSets' node
    selectors and tolerations and the node's labels and taints ('' when they allow it), and
    the first taint not tolerated (what the toleration fix adds), if that is the cause."""
    selecting = [
        ds
        for ds in daemonsets
        if vocab.labels_match(
            n.labels, ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeSelector")
        )
    ]
    if not selecting:
        return _("No device-plugin DaemonSet selects this node's labels (%(label)s=%(v)s).") % {
            "label": vocab.SHARING_LABEL,
            "v": n.sharing_label,
        }, None
    for ds in selecting:
        tolerations = ds["spec"]["template"]["spec"].get("tolerations")
        missing = [t for t in n.raw_taints if not vocab.tolerates([t], tolerations)]
        if missing and all(vocab.is_node_condition_taint(t) for t in missing):
            # Kubernetes set it from the node's state: the answer is the node, not a toleration
            return _(
                "The node carries %(taints)s (not Ready or under pressure): no new plugin pod starts "
                "there until Kubernetes lifts it."
            ) % {"taints": ", ".join(f"{t.get('key')}:{t.get('effect')}" for t in missing)}, None
        missing = [t for t in missing if not vocab.is_node_condition_taint(t)]
        if missing:
            taints = ", ".join(
                str(t) for t in n.taints if any(t.key == m.get("key") and t.effect == m.get("effect") for m in missing)
            )
            return _("DaemonSet %(ds)s should run here but does not tolerate the node's taint %(taints)s.") % {
                "ds": ds["metadata"]["name"],
                "taints": taints,
            }, missing[0]
    return "", None


@check(
    "plugin-missing",
    gettext_lazy("Device plugin not running"),
    explain=gettext_lazy(
        "No running device-plugin pod on a GPU node: it exposes no GPU. Usually a DaemonSet "
        "lacks a toleration for the node's taint, or no DaemonSet selects its labels; the "
        "finding names which. For a taint, Fix adds the toleration to both DaemonSets as a new "
        "manifest version and applies it."
    ),
)
def plugin_missing(inputs: HealthInputs) -> Iterable[Problem]:
    daemonsets = getattr(inputs.snapshot, "plugin_daemonsets", None) or []
    for n in inputs.ledger.nodes:
        # A node with a sharing-label typo has no plugin either: label-typo says why.
        if n.convention == "brick" and n.mode != "unlabelled" and n.plugin_state == "crashlooping":
            configmaps = getattr(inputs.snapshot, "plugin_configmaps", None) or []
            refused = _refused_config(n, daemonsets, configmaps)
            yield Problem(
                "bad",
                "plugin-missing",
                n.name,
                _(
                    "The device-plugin pod is in CrashLoopBackOff: the plugin exits at start and the "
                    "node exposes no GPU resource."
                )
                + (" " + refused if refused else ""),
                _(
                    "The plugin exits when it refuses its config: correct the config in the managed "
                    "manifest, apply it and restart the plugin (procedure C)."
                ),
            )
        elif n.convention == "brick" and n.mode != "unlabelled" and n.plugin_state in PLUGIN_DOWN:
            cause, taint = _why_no_plugin(n, daemonsets) if daemonsets else ("", None)
            facts = (
                {
                    "taint_key": taint.get("key", ""),
                    "taint_value": taint.get("value") or "",
                    "taint_effect": taint.get("effect", ""),
                }
                if taint
                else {}
            )
            # a not-Ready node: Kubernetes' own taint keeps every new DaemonSet pod off it
            not_ready = any(vocab.is_node_condition_taint(t) and not vocab.tolerates([t], None) for t in n.raw_taints)
            yield Problem(
                "bad",
                "plugin-missing",
                n.name,
                _("No Running device-plugin pod (%(s)s): the node exposes no GPU resource.") % {"s": n.plugin_state}
                + (" " + cause if cause else ""),
                _("Find why the node is not Ready (kubectl describe node); the plugin pod starts once it is.")
                if not_ready
                else _(
                    "If the pod is Pending or absent on a tainted node, a toleration is missing: keep "
                    "both DaemonSets' tolerations identical in the managed manifest and apply it."
                ),
                fix_params=facts,
            )


@check(
    "mig-single-not-uniform",
    gettext_lazy("MIG layout the device plugin refuses"),
    explain=gettext_lazy(
        "Under NVIDIA's MIG strategy single every GPU of a node must be in MIG mode with one "
        "MIG profile; otherwise the device plugin exits and GPU feature discovery labels the "
        "node MIG-INVALID, so the node offers no GPU. Change the node's MIG layout to one "
        "profile on every GPU, or run the node's plugin with MIG strategy mixed."
    ),
)
def mig_single_not_uniform(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        if n.mode == "mig-single" and n.mig_error:
            yield Problem(
                "bad",
                "mig-single-not-uniform",
                n.name,
                _(
                    "GPU feature discovery labels this node %(p)s: under MIG strategy single its GPUs are "
                    "not all partitioned alike (one MIG profile on every GPU), so the device plugin "
                    "refuses to start and the node offers no GPU."
                )
                % {"p": n.labels.get(vocab.GPU_PRODUCT_LABEL, "")},
                _(
                    "Give every GPU the same MIG layout (nvidia.com/mig.config, e.g. all-1g.10gb), or "
                    "use MIG strategy mixed for this node's device plugin."
                ),
            )


def _node_plugin_config(n: NodeLedger, snapshot: Snapshot | None) -> tuple[str, str] | None:
    """(where, text) of the config the node's device plugin reads: the ConfigMap the BRICK
    DaemonSet selecting the node mounts, or the GPU Operator's entry the node's
    nvidia.com/device-plugin.config label names; None when neither is known."""
    if n.convention == "brick":
        by_name = {cm["metadata"]["name"]: cm for cm in getattr(snapshot, "plugin_configmaps", None) or []}
        for ds in getattr(snapshot, "plugin_daemonsets", None) or []:
            spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            if not vocab.labels_match(n.labels, spec.get("nodeSelector")):
                continue
            names = [vol["configMap"].get("name") for vol in spec.get("volumes") or [] if "configMap" in vol]
            cm = by_name.get(names[0]) if names else None
            if cm is not None:
                return cm["metadata"]["name"], (cm.get("data") or {}).get(vocab.PLUGIN_CONFIG_KEY) or ""
        return None
    key = n.labels.get(vocab.DEVICE_PLUGIN_CONFIG_LABEL)
    for cm in getattr(snapshot, "operator_configmaps", None) or [] if key else []:
        data = cm.get("data") or {}
        if key in data:
            return f"{cm['metadata']['name']}/{key}", data[key] or ""
    return None


def _node_gpus(n: NodeLedger) -> list[KubeObject]:
    """The node's GPUs as the device plugin sees them: its devices, else its model, count and
    (under MIG strategy single) its profile from the labels."""
    if n.raw_devices:
        return list(n.raw_devices)
    mig = [n.mig_profile] if n.mig_profile else []
    return [{"model": n.model, "mig": mig} for _i in range(n.physical)]


@check(
    "mps-refused",
    gettext_lazy("MPS the device plugin refuses"),
    explain=gettext_lazy(
        "NVIDIA's device plugin shares whole GPUs by MPS only within its rules: at least 2 replicas, "
        "an mpsRoot for the MPS daemon, never with MIG strategy mixed, never MIG devices, and no more "
        "replicas than one MPS server takes per GPU (48 from compute capability 7.5, 16 before). "
        "Otherwise it exits and the node offers no GPU. Correct the config the node's plugin reads, "
        "or share the GPUs by time-slicing."
    ),
)
def mps_refused(inputs: HealthInputs) -> Iterable[Problem]:
    from brickadmin.cluster import deviceplugin as dp

    for n in inputs.ledger.nodes:
        found = _node_plugin_config(n, inputs.snapshot)
        if found is None:
            continue
        where, text = found
        try:
            cfg = vocab.parse_plugin_config(text)
        except Exception:  # noqa: BLE001  (not YAML: the plugin refuses it, and plugin-missing says so)
            continue
        if not isinstance(cfg, dict) or not isinstance(cfg.get("sharing"), dict) or cfg["sharing"].get("mps") is None:
            continue
        # A BRICK plugin crash-looping on its config: plugin-missing gives the config's reasons.
        said_elsewhere = n.convention == "brick" and n.plugin_state == "crashlooping"
        reasons = [] if said_elsewhere else list(plugin_config_errors(text))
        gpus = _node_gpus(n)
        hardware = "" if reasons else dp.mps_start_error(gpus, cfg, n.labels)
        if not (reasons or hardware):
            continue
        remedies = []
        if hardware == dp.MPS_OF_MIG_REFUSED:
            remedies.append(
                _("MPS does not share MIG devices: share them by time-slicing, or take the GPUs out of MIG mode.")
            )
        elif hardware:
            capability = dp.compute_capability(gpus[0] if gpus else None, n.labels)
            remedies.append(
                _(
                    "Give MPS at most %(most)d replicas: one MPS server takes that many clients per GPU of "
                    "compute capability %(cc)s."
                )
                % {"most": vocab.mps_max_clients(capability), "cc": capability}
            )
        else:
            remedies.append(
                _("Correct the config: MPS needs at least 2 replicas, an mpsRoot, and MIG strategy none or single.")
            )
        yield Problem(
            "bad",
            "mps-refused",
            n.name,
            _("The device plugin refuses to share this node's GPUs by MPS (config %(config)s): %(why)s")
            % {"config": where, "why": "; ".join([*reasons, hardware] if hardware else reasons)},
            " ".join(str(r) for r in remedies),
        )


@check(
    "replicas-not-reflected",
    gettext_lazy("Replicas not reflected"),
    explain=gettext_lazy(
        "The time-slicing config changed but the plugin still advertises the old replicas: "
        "the rollout restart was skipped. Fix restarts the time-slicing plugin and checks every "
        "node (procedure C would too)."
    ),
)
def replicas_not_reflected(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        if n.mode in REPLICATED_MODES and n.replicas != n.configured_replicas and n.plugin_state == "running":
            yield Problem(
                "warn",
                "replicas-not-reflected",
                n.name,
                _("Replicas configured %(c)d but the plugin advertises %(r)d per GPU.")
                % {"c": n.configured_replicas, "r": n.replicas},
                _("The rollout restart was skipped (procedure C step 3): restart the time-slicing plugin."),
            )


@check(
    "cordoned",
    gettext_lazy("Cordoned node"),
    explain=gettext_lazy(
        "A cordoned node takes no new pods: someone ran kubectl cordon, or a procedure "
        "cordoned it to drain it. If no procedure or maintenance is in progress, uncordon it."
    ),
)
def cordoned(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        if n.cordoned:
            yield Problem(
                "info",
                "cordoned",
                n.name,
                _("Cordoned: its GPUs take no new pods (%(n)d logical GPU(s) held back).") % {"n": n.logical},
                _("If no procedure or maintenance is in progress on it, uncordon it (Fix)."),
            )


@check(
    "quota-over-total",
    gettext_lazy("Quota over the Total"),
    explain=gettext_lazy(
        "Workspace quotas of a type add up to more than the cluster offers (after lowering "
        "replicas or converting nodes). Lower the quotas of the Workspaces named."
    ),
)
def quota_over_total(inputs: HealthInputs) -> Iterable[Problem]:
    owners = _owners(inputs.snapshot)
    for row in inputs.ledger.by_resource:
        if row.allocated > row.logical:
            holders = sorted(
                (
                    (ns, per[row.resource])
                    for ns, per in inputs.ledger.allocated_by_namespace.items()
                    if per.get(row.resource)
                ),
                key=lambda x: (-x[1], x[0]),
            )
            held = "; ".join(
                _("%(ws)s (owner %(owner)s): %(n)d") % {"ws": ns, "owner": owners.get(ns) or "?", "n": n}
                for ns, n in holders
            )
            yield Problem(
                "bad",
                "quota-over-total",
                row.resource,
                _("Allocated quota %(a)d exceeds the Total %(t)d.") % {"a": row.allocated, "t": row.logical}
                + (" " + _("Held by: %(held)s.") % {"held": held} if held else ""),
                _("Replicas were lowered or nodes converted: lower Workspace quotas of this type."),
                subject_type=RESOURCE,
                link=remedies.page_url("cluster_workspaces"),
                link_text=_("Edit the Workspaces' quotas"),
                # each Workspace named links to its quota page (templates/gpus/wizards/health.html)
                fix_params={"workspaces": [ns for ns, _n in holders]},
            )


def uses_operator_convention(ledger: Ledger) -> bool:
    """GPU nodes, none of them following the BRICK labels: the GPU Operator runs the plugin."""
    return bool(ledger.nodes) and all(n.convention != "brick" for n in ledger.nodes)


@check(
    "manifest-drift",
    gettext_lazy("Device plugin differs from the managed manifest"),
    explain=gettext_lazy(
        "The live device-plugin objects differ from the managed manifest (an edit by hand, or"
        " a version not applied). Apply the manifest, or save the live change as a version "
        "first."
    ),
)
def manifest_drift(inputs: HealthInputs) -> Iterable[Problem]:
    """Live device-plugin objects that differ from the managed manifest (someone used
    kubectl edit, or a version was saved but not applied)."""
    items = [d for d in inputs.drift or [] if d.state != "in-sync"]
    if items and uses_operator_convention(inputs.ledger) and all(d.state == "missing" for d in items):
        return  # BRICK's own objects are not used on such a cluster: the convention check says so
    for d in items:
        what = (
            _("missing on the cluster")
            if d.state == "missing"
            else _("differs from the managed manifest at %(paths)s") % {"paths": ", ".join(d.paths[:5])}
        )
        yield Problem(
            "warn",
            "manifest-drift",
            f"{d.kind}/{d.name}",
            what,
            _(
                "Apply the managed manifest (or save the live change as a new version first, if it "
                "was intended). A later apply of an old file would silently undo hand edits."
            ),
            subject_type=MANIFEST,
        )


@check(
    "convention",
    gettext_lazy("GPU Operator convention"),
    explain=gettext_lazy(
        "The cluster follows the GPU Operator convention: its own objects run the plugin, so "
        "BRICK's are not expected. Nothing to do."
    ),
)
def convention(inputs: HealthInputs) -> Iterable[Problem]:
    """Said once, so that the absent BRICK device-plugin objects are not reported as problems."""
    if uses_operator_convention(inputs.ledger) and any(d.state == "missing" for d in inputs.drift or []):
        yield Problem(
            "info",
            "convention",
            _("cluster"),
            _(
                "This cluster's GPU nodes follow the NVIDIA GPU Operator convention: the Operator runs "
                "the device plugin, so BRICK's own device-plugin objects are not used here."
            ),
            _("Nothing to do. The wizards follow the BRICK labels; procedure D adds a node the BRICK way."),
            subject_type=RESOURCE,
        )


@check(
    "run-left-cordoned",
    gettext_lazy("Left cordoned by a stopped run"),
    reads="records",
    explain=gettext_lazy(
        "A run stopped (failed, cancelled or interrupted) after cordoning its node. Resume it"
        " to finish, or Fix: restore the node (its labels as before the run, uncordoned)."
    ),
)
def run_left_cordoned(inputs: HealthInputs) -> Iterable[Problem]:
    for run, node_cordoned in inputs.stopped_runs:
        if node_cordoned:
            yield Problem(
                "warn",
                "run-left-cordoned",
                run.node,
                _("Run #%(id)d (%(proc)s) is %(status)s and left the node cordoned.")
                % {"id": run.pk, "proc": run.get_procedure_display(), "status": run.get_status_display()},
                _("Resume the run to finish the conversion, or restore the node from the run's page."),
                link=run.get_absolute_url(),
                link_text=_("Open run #%(id)d") % {"id": run.pk},
                fix_params={"restore_of": run.pk},
            )


# The ServiceBeat row that says since when the console has been looking for the periodic
# services' beats (written at its first look): a beat never recorded past the grace is due.
CONSOLE_UP = "console-up"


@check(
    "reaper-stopped",
    gettext_lazy("Background tasks not running"),
    reads="records",
    explain=gettext_lazy(
        "The reaper, which Celery beat starts every few seconds on a worker, has not run for"
        " minutes: runs whose worker died are not resumed and lost runs are not queued again."
        " Start or restart the worker with beat."
    ),
)
def reaper_stopped(inputs: HealthInputs) -> Iterable[Problem]:
    beats = inputs.service_beats or {}
    last, up_since = beats.get("reaper"), beats.get(CONSOLE_UP)
    now = inputs.now or datetime.now(UTC)
    if last is not None and now - last > inputs.service_late_after:
        message = _(
            "The reaper last ran at %(when)s (it runs every few seconds): Celery beat or the "
            "worker is not running, so runs whose worker died stay stuck and are not resumed."
        ) % {"when": last.strftime("%Y-%m-%d %H:%M:%S UTC")}
    elif last is None and up_since is not None and now - up_since > inputs.service_late_after:
        # A beat that never started is as silent as one that stopped: no run was ever recorded.
        message = _(
            "The reaper has never run, though brickadmin has been up since %(when)s (it runs every few "
            "seconds): Celery beat or the worker was never started, so runs whose worker died stay stuck "
            "and are not resumed."
        ) % {"when": up_since.strftime("%Y-%m-%d %H:%M:%S UTC")}
    else:
        return
    yield Problem(
        "bad",
        "reaper-stopped",
        _("background tasks"),
        message,
        _(
            "Start or restart the worker with beat (celery -A brickadmin worker --beat, or the "
            "worker and beat Deployments) and check their logs; the reaper resumes stuck runs by itself."
        ),
        subject_type=RESOURCE,
    )


CHECKLIST_WAIT = timedelta(days=1)


@check(
    "checklist-waiting",
    gettext_lazy("Waiting for a checklist"),
    reads="records",
    explain=gettext_lazy(
        "A node addition waits for its build checklist to be confirmed. Confirm it on the "
        "run's page once the driver and runtime are installed."
    ),
)
def checklist_waiting(inputs: HealthInputs) -> Iterable[Problem]:
    now = inputs.now or datetime.now(UTC)
    for run, _cordoned in inputs.stopped_runs:
        if remedies.waits_for_checklist(run) and run.finished_at and now - run.finished_at > CHECKLIST_WAIT:
            yield Problem(
                "info",
                "checklist-waiting",
                run.node,
                _("Run #%(id)d has been waiting for its checklist confirmation since %(when)s.")
                % {"id": run.pk, "when": run.finished_at.strftime("%Y-%m-%d %H:%M UTC")},
                _(
                    "Confirm the checklist on the run's page once the node is ready, or leave it: "
                    "nothing changes on the cluster meanwhile."
                ),
                link=run.get_absolute_url(),
                link_text=_("Open run #%(id)d") % {"id": run.pk},
            )


# --- GPUs published through Dynamic Resource Allocation (NVIDIA's DRA driver) -------------


@check(
    "dra-pool-incomplete",
    gettext_lazy("DRA pool not seen whole"),
    explain=gettext_lazy(
        "A node's ResourceSlices say how many slices its pool has (resourceSliceCount); fewer "
        "were seen at its newest generation. The scheduler allocates nothing from such a pool, "
        "so its GPUs are not counted. Usually the driver is publishing a new generation, or its "
        "kubelet plugin stopped half way: look at the plugin's logs on the node."
    ),
)
def dra_pool_incomplete(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        for pool in n.dra.incomplete_pools if n.dra is not None else []:
            yield Problem(
                "warn",
                "dra-pool-incomplete",
                n.name,
                _(
                    "Pool %(pool)s of %(driver)s: %(seen)d of %(expected)d ResourceSlices seen at generation "
                    "%(generation)d. Its devices are not counted and the scheduler allocates none of them."
                )
                % {
                    "pool": pool.name,
                    "driver": pool.driver,
                    "seen": pool.seen,
                    "expected": pool.expected,
                    "generation": pool.generation,
                },
                _(
                    "Check the DRA kubelet plugin on the node (kubectl -n nvidia-dra-driver-gpu logs on its "
                    "pod); the pool counts again once every slice of one generation is published."
                ),
            )


@check(
    "dra-both-stacks",
    gettext_lazy("GPUs published by both the device plugin and DRA"),
    explain=gettext_lazy(
        "The node advertises nvidia.com/* through the device plugin and also publishes GPUs "
        "through NVIDIA's DRA driver. Each stack hands out the same GPUs without knowing of the "
        "other, so one GPU can go to two pods. Run one stack per node: convert the node to DRA "
        "or back to the device plugin."
    ),
)
def dra_both_stacks(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        if n.stack == "both":
            plugin = sorted(r.resource for r in n.served if not is_dra_resource(r.resource) and r.allocatable)
            yield Problem(
                "bad",
                "dra-both-stacks",
                n.name,
                _(
                    "Served by the device plugin (%(resources)s) and by the DRA driver (%(devices)d devices): "
                    "the same GPU can be given to a pod of each."
                )
                % {"resources": ", ".join(plugin) or "nvidia.com/gpu", "devices": len(n.dra.devices) if n.dra else 0},
                _(
                    "Keep one stack on the node: stop the device plugin there (remove the label its DaemonSet "
                    "selects) or the DRA kubelet plugin, after draining it."
                ),
            )


@check(
    "dra-stranded-gpu",
    gettext_lazy("GPU without a DRA device"),
    explain=gettext_lazy(
        "DCGM sees more GPUs on a DRA node than the driver publishes: a GPU in MIG mode with no "
        "MIG devices created, or one the plugin could not read, is offered to nobody. It is "
        "counted as physical here, never as a silent zero."
    ),
)
def dra_stranded_gpu(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        if n.stack != "dra" or n.dra is None or not n.raw_devices or n.dra.incomplete_pools:
            continue
        published = {g.gpu for g in n.dra.gpus}
        stranded = [d for d in n.raw_devices if d.get("uuid") and d.get("uuid") not in published]
        if len(n.raw_devices) > n.dra.physical and stranded:
            yield Problem(
                "warn",
                "dra-stranded-gpu",
                n.name,
                _("DCGM sees %(seen)d GPUs, the DRA driver publishes %(published)d: %(uuids)s offered to nobody.")
                % {
                    "seen": len(n.raw_devices),
                    "published": n.dra.physical,
                    "uuids": ", ".join(str(d["uuid"]) for d in stranded[:4]),
                },
                _(
                    "If the GPU is in MIG mode with no MIG devices, create its partitions (or disable MIG); "
                    "otherwise restart the DRA kubelet plugin on the node and read its logs."
                ),
            )


@check(
    "dra-device-taint",
    gettext_lazy("Tainted DRA device"),
    explain=gettext_lazy(
        "A device carries a taint, set by the driver (an unhealthy GPU) or by a DeviceTaintRule. "
        "NoSchedule keeps new claims off it, NoExecute also evicts the pods using it; effect None "
        "changes nothing and is the rule's dry run: the finding says which pods it would evict."
    ),
)
def dra_device_taint(inputs: HealthInputs) -> Iterable[Problem]:
    for n in inputs.ledger.nodes:
        for d in n.dra.devices if n.dra is not None else []:
            for t in d.taints:
                effect, rule = str(t.get("effect", "")), str(t.get("rule", ""))
                taint = (
                    f"{t.get('key', '')}={t.get('value', '')}:{effect}"
                    if t.get("value")
                    else f"{t.get('key')}:{effect}"
                )
                pods = ", ".join(d.pods[:5]) or _("no pod")
                if effect == "None":
                    message = _("DeviceTaintRule %(rule)s (dry run) on %(device)s would evict: %(pods)s.") % {
                        "rule": rule,
                        "device": d.name,
                        "pods": pods,
                    }
                    severity = "info"
                else:
                    by = (_("by DeviceTaintRule %(rule)s") % {"rule": rule}) if rule else _("by the driver")
                    message = _("%(device)s is tainted %(taint)s %(by)s; pods on it: %(pods)s.") % {
                        "device": d.name,
                        "taint": taint,
                        "by": by,
                        "pods": pods,
                    }
                    severity = "bad" if effect == "NoExecute" and d.pods else "warn"
                yield Problem(
                    severity,
                    "dra-device-taint",
                    n.name,
                    message,
                    _(
                        "If the GPU is healthy, delete the rule or the taint; if not, let its pods move and "
                        "have the GPU replaced or reset."
                    ),
                    fix_params={"device": d.name, "pool": d.pool},
                )


UNHEALTHY_TAINT_KEY = "brick.cloud/unhealthy"  # the key G's taint of an unhealthy device is prefilled with


def _gpu_of(n: NodeLedger | None, d: device_health.HeldDevice) -> str:
    """The physical GPU behind a held device, when the node's devices say (a DRA device's GPU, or
    the GPU DCGM sees under the device plugin's device ID), else ''."""
    if n is None:
        return ""
    if d.is_dra:
        dev = next((x for x in (n.dra.devices if n.dra else []) if x.name == d.device and x.pool == d.pool), None)
        return dev.gpu if dev is not None and not dev.gpu.startswith("counterset:") else ""
    return next((str(raw["uuid"]) for raw in n.raw_devices if raw.get("uuid") == d.gpu), "")


@check(
    "pod-device-unhealthy",
    gettext_lazy("Pod running on an unhealthy GPU"),
    explain=gettext_lazy(
        "The kubelet reports a device a running pod holds as Unhealthy (allocatedResourcesStatus, from the "
        "DRA driver or the device plugin): the pod's work may fail or be wrong. For a DRA device, taint it "
        "NoExecute with procedure G, which the finding opens with the device chosen: its pods are evicted and "
        "no new claim gets it. For a device-plugin GPU, cordon and drain the node, or restart the pod once the "
        "GPU is reset."
    ),
)
def pod_device_unhealthy(inputs: HealthInputs) -> Iterable[Problem]:
    snap = inputs.snapshot
    owners = _owners(snap)
    pods = device_health.pods_reporting_health(snap)
    for d in device_health.devices_by_health(pods, device_health.UNHEALTHY):
        n = inputs.ledger.node(d.node) if d.node else None
        gpu = _gpu_of(n, d) or d.resource_id
        behind = f" [{gpu}]" if gpu != d.resource_id else ""  # the GPU behind the device, when known apart
        words = {"pod": d.pod_key, "ws": d.namespace, "owner": owners.get(d.namespace) or "?"}
        if d.is_dra:
            device = _("device %(device)s of pool %(pool)s (%(driver)s)") % {
                "device": d.device,
                "pool": d.pool,
                "driver": d.driver,
            }
            message = _(
                "Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) runs on %(device)s%(gpu)s, through its claim "
                "%(claim)s; the kubelet reports the device Unhealthy."
            ) % {**words, "device": device, "gpu": behind, "claim": d.claim}
            facts: dict[str, Any] = {}
            if d.driver == DRIVER_NAME and d.pool == d.node:  # NVIDIA's driver: one pool per node, G's rule
                facts = {
                    "device": d.device,
                    "pool": d.pool,
                    "driver": d.driver,
                    "effect": "NoExecute",
                    "taint_key": UNHEALTHY_TAINT_KEY,
                }
                remedy = _(
                    "Taint the device NoExecute (procedure G, the device chosen): its pods are evicted and no new "
                    "claim is given it. Have the GPU reset or replaced, then delete the rule."
                )
            else:
                remedy = _(
                    "Taint the device NoExecute with a DeviceTaintRule selecting driver %(driver)s, pool %(pool)s "
                    "and device %(device)s: its pods are evicted and no new claim is given it. Have the device "
                    "reset or replaced, then delete the rule."
                ) % {"driver": d.driver, "pool": d.pool, "device": d.device}
        else:
            message = _(
                "Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) runs on %(res)s device %(device)s%(gpu)s; the "
                "kubelet reports it Unhealthy."
            ) % {**words, "res": d.resource, "device": d.resource_id, "gpu": behind}
            remedy = _(
                "Cordon and drain the node (kubectl drain %(node)s --ignore-daemonsets) so the pod is recreated "
                "on a healthy GPU, or restart the pod once the GPU is reset; have a GPU that stays unhealthy "
                "replaced. The device plugin stops offering it meanwhile."
            ) % {"node": d.node}
            facts = {}
        yield Problem(
            "bad",
            "pod-device-unhealthy",
            d.node or d.pod_key,
            message,
            remedy,
            subject_type=NODE if d.node else RESOURCE,
            fix_params=facts,
        )


@check(
    "pod-device-health-unknown",
    gettext_lazy("GPU health the kubelet cannot tell"),
    explain=gettext_lazy(
        "The kubelet reports the health of devices running pods hold as Unknown: the DRA kubelet plugin or "
        "the device plugin that would tell it is not registered or not reporting. Nothing is wrong with the "
        "pods for all it knows; if it lasts, look at the plugin on the node."
    ),
)
def pod_device_health_unknown(inputs: HealthInputs) -> Iterable[Problem]:
    snap = inputs.snapshot
    pods = device_health.pods_reporting_health(snap)
    by_node: dict[str, list[device_health.HeldDevice]] = {}
    for d in device_health.devices_by_health(pods, device_health.UNKNOWN):
        by_node.setdefault(d.node, []).append(d)
    for node, held in by_node.items():
        devices = sorted({d.device or d.resource_id for d in held})
        pod_keys = sorted({d.pod_key for d in held})
        yield Problem(
            "info",
            "pod-device-health-unknown",
            node or pod_keys[0],
            _("The kubelet cannot tell the health of %(devices)s, held by %(pods)s.")
            % {"devices": ", ".join(devices[:5]), "pods": ", ".join(pod_keys[:5])},
            _(
                "Nothing to do for the pods. If it lasts, check that the node's DRA kubelet plugin or device "
                "plugin is running: the kubelet says Unknown while it is not registered."
            ),
            subject_type=NODE if node else RESOURCE,
        )


def _dynamic_mig(n: NodeLedger) -> bool:
    return n.dra is not None and any(g.mode == DYNAMIC_MIG for g in n.dra.gpus)


@check(
    "dra-mig-manager",
    gettext_lazy("mig-manager on a node DRA partitions"),
    explain=gettext_lazy(
        "NVIDIA's DRA driver creates a node's MIG devices when claims ask for them (dynamic MIG), and the GPU "
        "Operator's mig-manager also runs there: both change the GPUs' MIG layout, so mig-manager can destroy "
        "MIG devices pods are using. Fix labels the node nvidia.com/gpu.deploy.mig-manager=false, which stops "
        "mig-manager there; the DRA driver keeps partitioning."
    ),
)
def dra_mig_manager(inputs: HealthInputs) -> Iterable[Problem]:
    pods_by_node: dict[str, list[KubeObject]] = {}
    for p in getattr(inputs.snapshot, "mig_manager_pods", None) or []:
        pods_by_node.setdefault((p.get("spec") or {}).get("nodeName", ""), []).append(p)
    for n in inputs.ledger.nodes:
        if not _dynamic_mig(n):
            continue
        signs = device_health.mig_manager_signs(n.labels, pods_by_node.get(n.name, []))
        if not signs:
            continue
        held = sum(1 for d in n.dra.devices if d.kind == "mig" and d.claims) if n.dra else 0
        yield Problem(
            "bad" if held else "warn",
            "dra-mig-manager",
            n.name,
            _(
                "NVIDIA's DRA driver partitions this node's GPUs when claims ask (dynamic MIG), and mig-manager "
                "runs here too (%(signs)s): either can change the MIG layout under the other; %(n)d MIG "
                "device(s) are held by claims now."
            )
            % {"signs": ", ".join(signs), "n": held},
            _(
                "Stop mig-manager on the node: label it %(label)s=false (Fix). The DRA driver keeps making "
                "the MIG devices claims ask for."
            )
            % {"label": vocab.MIG_MANAGER_DEPLOY_LABEL},
        )


def _owners(snapshot: Snapshot | None) -> dict[str, str]:
    """namespace -> the Workspace owner named by its label."""
    return {
        ns["metadata"]["name"]: (ns["metadata"].get("labels") or {}).get(vocab.OWNER_LABEL, "")
        for ns in getattr(snapshot, "namespaces", None) or []
    }


def _pod_words(pod: KubeObject, owners: dict[str, str]) -> dict[str, str]:
    md = pod.get("metadata") or {}
    ns = md.get("namespace", "")
    return {"pod": f"{ns}/{md.get('name', '')}", "ws": ns, "owner": owners.get(ns) or "?"}


@check(
    "pod-admission-failed",
    gettext_lazy("GPU pod refused by the kubelet"),
    explain=gettext_lazy(
        "The kubelet refused a GPU pod (UnexpectedAdmissionError): it asked for more than one"
        " shared GPU, or landed on a stale resource. The finding says which. Fix tells the "
        "owner on their Workspace page and deletes the pod; the owner recreates it."
    ),
)
def pod_admission_failed(inputs: HealthInputs) -> Iterable[Problem]:
    """Pods the kubelet refused (UnexpectedAdmissionError), explained by their cause."""
    from brickadmin.cluster.deviceplugin import pod_gpu_requests

    owners = _owners(inputs.snapshot)
    for pod in getattr(inputs.snapshot, "failed_gpu_pods", None) or []:
        status = pod.get("status") or {}
        if status.get("reason") != "UnexpectedAdmissionError":
            continue
        words = _pod_words(pod, owners)
        node_name = (pod.get("spec") or {}).get("nodeName", "")
        requests = pod_gpu_requests(pod)
        n = inputs.ledger.node(node_name) if node_name else None
        stale = [r for r in requests if n is not None and r in n.resources and n.resources[r].stale]
        by_mps = [
            r
            for r, count in requests.items()
            if count > 1 and n is not None and r in n.resources and n.resources[r].sharing_strategy == MPS
        ]
        if by_mps:
            message = _(
                "Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) asked for %(n)d %(res)s: the node shares it by "
                "MPS, which gives a container one replica (failRequestsGreaterThanOne, on unless the plugin's "
                "config turns it off), so the kubelet refused it."
            ) % {**words, "n": requests[by_mps[0]], "res": by_mps[0]}
            remedy = _(
                "Ask the owner to request one MPS replica per container (or an exclusive GPU for more), then "
                "recreate the pod."
            )
        elif requests.get(vocab.GPU_SHARED, 0) > 1:
            message = _(
                "Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) asked for %(n)d %(res)s: time-slicing "
                "allows one per pod (failRequestsGreaterThanOne), so the kubelet refused it."
            ) % {**words, "n": requests[vocab.GPU_SHARED], "res": vocab.GPU_SHARED}
            remedy = _(
                "Ask the owner to request one shared GPU per pod (or an exclusive GPU for more), then recreate the pod."
            )
        elif stale:
            message = _(
                "Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) was scheduled on %(node)s, where %(res)s "
                "is stale but was still allocatable; the kubelet refused it."
            ) % {**words, "node": node_name, "res": ", ".join(stale)}
            remedy = _(
                "Remove the stale resource from the node's status (step 6 of procedure A/B), then "
                "recreate the pod: it will not start by itself."
            )
        else:
            message = _("Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) was refused by the kubelet: %(why)s") % {
                **words,
                "why": status.get("message") or status.get("reason"),
            }
            remedy = _("Read the kubelet's message; recreate the pod once its cause is fixed.")
        md = pod.get("metadata") or {}
        facts = {"pod_namespace": md.get("namespace", ""), "pod_name": md.get("name", "")} if node_name else {}
        yield Problem(
            "bad",
            "pod-admission-failed",
            node_name or words["pod"],
            message,
            remedy,
            subject_type=NODE if node_name else RESOURCE,
            fix_params=facts,
        )


@check(
    "pod-pending-no-resource",
    gettext_lazy("GPU pod waiting for a resource no node offers"),
    explain=gettext_lazy(
        "A pod waits for a GPU resource that no node offers any more, after a conversion. "
        "Convert a node back or move the Workspace to the type offered now."
    ),
)
def pod_pending_no_resource(inputs: HealthInputs) -> Iterable[Problem]:
    """Pods Pending for a GPU resource that no node serves any more (after a conversion)."""
    from brickadmin.cluster.deviceplugin import pod_gpu_requests

    owners = _owners(inputs.snapshot)
    offered = {r.resource for r in inputs.ledger.by_resource if r.logical > 0}
    for pod in getattr(inputs.snapshot, "gpu_pods", None) or []:
        if (pod.get("status") or {}).get("phase") != "Pending" or (pod.get("spec") or {}).get("nodeName"):
            continue
        missing = sorted(r for r in pod_gpu_requests(pod) if r not in offered)
        if missing:
            yield Problem(
                "warn",
                "pod-pending-no-resource",
                ", ".join(missing),
                _(
                    "Pod %(pod)s (Workspace %(ws)s, owner %(owner)s) is Pending: it asks for %(res)s, which "
                    "no node offers any more."
                )
                % {**_pod_words(pod, owners), "res": ", ".join(missing)},
                _(
                    "Convert a node back to the mode that serves it, or ask the owner to use the GPU type "
                    "the cluster offers now."
                ),
                subject_type=RESOURCE,
            )


@check(
    "kueue-not-installed",
    gettext_lazy("Elastic quota available once Kueue is installed"),
    reads="records",
    explain=gettext_lazy(
        "Workspaces hold fixed GPU quotas: an idle Workspace keeps its GPUs while another waits. With Kueue "
        "installed in the cluster, an approval grants a guarantee and a burst ceiling, and idle guaranteed "
        "GPUs are lent and taken back (docs/operator-guide.md#elastic-quota)."
    ),
)
def kueue_not_installed(inputs: HealthInputs) -> Iterable[Problem]:
    """Workspaces exist and the cluster does not serve Kueue (as last read: unknown says nothing)."""
    ws: Any = inputs.workspaces
    if ws is None or getattr(ws, "kueue_served", None) is not False or not getattr(ws, "records", None):
        return
    yield Problem(
        "info",
        "kueue-not-installed",
        "kueue.x-k8s.io",
        _(
            "%(n)d Workspaces hold fixed GPU quotas: what one leaves idle, no other can use. Elastic quota "
            "(a guarantee, a burst ceiling, idle GPUs lent and taken back) is available once Kueue is installed."
        )
        % {"n": len(ws.records)},
        _(
            "Install Kueue (v0.17 or later) in the cluster and select the Workspace namespaces in its "
            "configuration, as the operator guide says; approvals then write its queues."
        ),
        subject_type=RESOURCE,
    )
