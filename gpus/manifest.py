"""The managed device-plugin manifest (brick-nvidia-device-plugin.yaml) as versioned content.

Pure parts: parse, validate, set_replicas, drift (desired vs live). Effects: current(),
save_version(), apply() (server-side apply; a changed DaemonSet selector is handled by
delete + re-create, since spec.selector is immutable).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from brickadmin.cluster import NotFound, PermanentClusterError
from brickadmin.cluster.pluginconfig import plugin_config_errors
from brickadmin.cluster.vocabulary import COMPONENT_LABEL as COMPONENT
from brickadmin.cluster.vocabulary import (
    DEFAULT_DAEMONSET,
    MPS_CAPABLE_LABEL,
    MPS_CONFIGMAP,
    MPS_CONTROL_DAEMONSET,
    MPS_DAEMONSET,
    SHARING_LABEL,
    TS_CONFIGMAP,
    TS_DAEMONSET,
    configmap_replicas,
    mps_configmap_replicas,
    parse_plugin_config,
    time_slicing,
    tolerates,
)
from brickadmin.cluster.vocabulary import PLUGIN_CONFIG_KEY as CONFIG_KEY
from brickadmin.cluster.vocabulary import PLUGIN_NAMESPACE as NAMESPACE
from brickadmin.cluster.vocabulary import RESTARTED_AT_ANNOTATION as RESTARTED_AT

# The plugin's names are read from here too (procedures, pages).
__all__ = [
    "ALLOWED_KINDS",
    "COMPONENT",
    "CONFIG_KEY",
    "DEFAULT_DAEMONSET",
    "MANIFEST_FILE",
    "MAX_DEPTH",
    "MAX_NODES",
    "MPS_CONFIGMAP",
    "MPS_CONTROL_DAEMONSET",
    "MPS_DAEMONSET",
    "NAMESPACE",
    "RESTARTED_AT",
    "SHARING_LABEL",
    "TS_CONFIGMAP",
    "TS_DAEMONSET",
    "DriftItem",
    "ManifestError",
    "Validation",
    "add_toleration",
    "apply",
    "configmap_replicas",
    "current",
    "daemonsets_tolerate",
    "drift",
    "foreign_documents",
    "parse",
    "parse_plugin_config",
    "refused_configs",
    "save_version",
    "set_replicas",
    "subset_diff",
    "time_slicing",
    "tolerates",
    "toleration_for",
    "ts_replicas",
    "validate",
]

MANIFEST_FILE = Path(__file__).resolve().parent / "manifests" / "brick-nvidia-device-plugin.yaml"


class ManifestError(ValueError):
    pass


# What the managed manifest may hold: the device plugin's ConfigMaps and DaemonSets, in the
# plugin's namespace: a saved Node or ResourceQuota document must not be applied as it is.
ALLOWED_KINDS = {"ConfigMap": "v1", "DaemonSet": "apps/v1"}
MAX_DEPTH = 40  # the plugin's objects nest about 12 levels
MAX_NODES = 100_000  # aliases can multiply a small text into a huge document
MAX_DOCUMENTS = 20  # the plugin's manifest holds 7 (three ConfigMaps, four DaemonSets)
MAX_CHARACTERS = 256 * 1024  # the plugin's manifest is about 4 KB


def _measure(obj, memo: dict, depth: int = 0) -> tuple[int, int]:
    """(depth, node count) of a parsed document, aliases counted as many times as they are
    used; shared nodes are measured once."""
    if depth > MAX_DEPTH:
        return depth, 1
    children = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else None
    if children is None:
        return 0, 1
    key = id(obj)
    if key not in memo:
        deepest, count = 0, 1
        for child in children:
            d, n = _measure(child, memo, depth + 1)
            deepest, count = max(deepest, d + 1), min(count + n, MAX_NODES + 1)
        memo[key] = (deepest, count)
    return memo[key]


def _too_big(parsed, memo: dict) -> str | None:
    """Why a parsed YAML document is refused (nested too deep, or too many values once its
    aliases are expanded), or None. The same limits for the manifest's documents and for the
    config files inside its ConfigMaps, which the device plugin parses in turn."""
    depth, count = _measure(parsed, memo)
    if depth > MAX_DEPTH:
        return _("nested more than %(n)d levels deep") % {"n": MAX_DEPTH}
    if count > MAX_NODES:
        return _("too large (more than %(n)d values once aliases are expanded)") % {"n": MAX_NODES}
    return None


def parse(content: str) -> list[dict]:
    """The documents of a manifest, refused when it is longer than MAX_CHARACTERS, holds more
    than MAX_DOCUMENTS documents, or a document nested or expanded beyond the limits above.
    Linear in the text: documents are read one at a time and counted as they come."""
    if len(content) > MAX_CHARACTERS:
        raise ManifestError(
            _(
                "The manifest is %(size)d characters long; at most %(max)d are accepted "
                "(the device plugin's manifest is about 4,000)."
            )
            % {"size": len(content), "max": MAX_CHARACTERS}
        )
    docs = []
    try:
        for d in yaml.safe_load_all(content):
            if not d:
                continue
            docs.append(d)
            if len(docs) > MAX_DOCUMENTS:
                raise ManifestError(
                    _("The manifest holds more than %(max)d documents; the device plugin's manifest has four.")
                    % {"max": MAX_DOCUMENTS}
                )
    except yaml.YAMLError as exc:
        raise ManifestError(_("Not valid YAML: %(err)s") % {"err": exc}) from exc
    except RecursionError:
        raise ManifestError(_("Not valid YAML: nested more than %(n)d levels deep.") % {"n": MAX_DEPTH}) from None
    memo: dict = {}
    for i, d in enumerate(docs):
        depth, count = _measure(d, memo)
        if depth > MAX_DEPTH:
            raise ManifestError(
                _("Document %(i)d is nested more than %(n)d levels deep.") % {"i": i + 1, "n": MAX_DEPTH}
            )
        if count > MAX_NODES:
            raise ManifestError(
                _("Document %(i)d is too large (more than %(n)d values once aliases are expanded).")
                % {"i": i + 1, "n": MAX_NODES}
            )
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("kind"), str)
            or not d["kind"]
            or not isinstance(d.get("metadata"), dict)
            or not isinstance(d["metadata"].get("name"), str)
            or not d["metadata"]["name"]
        ):
            raise ManifestError(_("Document %(i)d has no kind or metadata.name") % {"i": i + 1})
    return docs


def foreign_documents(docs: list[dict]) -> list[str]:
    """Why each document that is not the device plugin's own may not be in the manifest:
    only ConfigMaps and DaemonSets in the plugin namespace are managed here."""
    out = []
    for d in docs:
        kind, md = d["kind"], d["metadata"]
        ns = md.get("namespace")
        if ALLOWED_KINDS.get(kind) != d.get("apiVersion") or ns != NAMESPACE:
            out.append(
                _(
                    "%(kind)s %(name)s (namespace %(ns)s, apiVersion %(api)s) is not allowed: the manifest "
                    "may hold only the device plugin's ConfigMaps (v1) and DaemonSets (apps/v1) in "
                    "namespace %(plugin_ns)s."
                )
                % {
                    "kind": kind,
                    "name": md["name"],
                    "ns": ns or _("none"),
                    "api": d.get("apiVersion") or _("none"),
                    "plugin_ns": NAMESPACE,
                }
            )
    return out


def _docs_of(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def _config(cm: dict) -> dict:
    return parse_plugin_config((cm.get("data") or {}).get(CONFIG_KEY) or "")


def nested_config_errors(cm: dict) -> list[str]:
    """Each file of a ConfigMap (its data values: config.yaml, and any other config the
    plugin's config manager may select) nested or expanded beyond the manifest's own limits:
    the plugin would parse it as it is, a billion-laughs config included."""
    out = []
    data = cm.get("data") if isinstance(cm.get("data"), dict) else {}
    for key, text in data.items():
        if not isinstance(text, str):
            continue
        try:
            parsed = list(yaml.safe_load_all(text))
        except (yaml.YAMLError, RecursionError):
            continue  # not YAML: refused_configs says so for config.yaml; other files are not the plugin's
        memo: dict = {}
        for why in filter(None, (_too_big(p, memo) for p in parsed)):
            out.append(
                _("ConfigMap %(name)s, %(key)s: %(why)s; the device plugin would parse it as it is.")
                % {"name": cm["metadata"]["name"], "key": key, "why": why}
            )
            break
    return out


def refused_configs(docs: list[dict]) -> list[str]:
    """Each device-plugin config of the documents that NVIDIA's plugin refuses at start, with
    its reasons: applied, it would make every plugin pod mounting it exit and crash-loop, and
    their nodes expose no GPU."""
    out = []
    for cm in _docs_of(docs, "ConfigMap"):
        data = cm.get("data") if isinstance(cm.get("data"), dict) else {}
        nested = nested_config_errors(cm)
        if nested:
            out += nested
            continue
        if CONFIG_KEY not in data:
            out.append(
                _("ConfigMap %(name)s has no %(key)s: the device plugin could not open its config file and would exit.")
                % {"name": cm["metadata"]["name"], "key": CONFIG_KEY}
            )
            continue
        try:
            config = parse_plugin_config(data[CONFIG_KEY])
        except (yaml.YAMLError, RecursionError) as exc:
            out.append(
                _("%(name)s: config.yaml is not valid YAML: %(err)s") % {"name": cm["metadata"]["name"], "err": exc}
            )
            continue
        for reason in plugin_config_errors(config):
            out.append(
                _(
                    "ConfigMap %(name)s, %(key)s: %(reason)s With it the device plugin exits at start "
                    "and its pods crash-loop."
                )
                % {"name": cm["metadata"]["name"], "key": CONFIG_KEY, "reason": reason}
            )
    return out


def ts_replicas(docs: list[dict]) -> int | None:
    return configmap_replicas(_docs_of(docs, "ConfigMap"))


@dataclass
class Validation:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self):
        return not self.errors


def validate(docs: list[dict]) -> Validation:
    """The rules of docs/operator-guide.md#the-device-plugin and #procedures: two
    ConfigMaps and two DaemonSets; identical tolerations; replicas >= 2; renameByDefault
    under sharing.timeSlicing (not flags); node selectors on the sharing label; each
    DaemonSet mounts a ConfigMap the file defines. Nothing but the plugin's ConfigMaps and
    DaemonSets in its namespace; a document of an unexpected shape is an error, not a crash.
    Each ConfigMap's config.yaml one that NVIDIA's device plugin loads (refused_configs)."""
    v = Validation()
    v.errors += foreign_documents(docs)
    names = Counter((d["kind"], d["metadata"]["name"]) for d in docs)  # one pass, however many documents
    for kind, name in sorted(n for n, times in names.items() if times > 1):
        v.errors.append(_("%(kind)s %(name)s appears more than once.") % {"kind": kind, "name": name})
    try:
        v.errors += refused_configs(docs)
        _validate(docs, v)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, yaml.YAMLError, RecursionError) as exc:
        v.errors.append(
            _("The documents do not have the expected structure (%(err)s).")
            % {"err": f"{type(exc).__name__}: {exc}"[:300]}
        )
    return v


MPS_SET = (MPS_CONFIGMAP, MPS_DAEMONSET, MPS_CONTROL_DAEMONSET)  # MPS needs all three, or none


def _validate(docs: list[dict], v: Validation) -> None:
    cms = {d["metadata"]["name"]: d for d in _docs_of(docs, "ConfigMap")}
    dss = {d["metadata"]["name"]: d for d in _docs_of(docs, "DaemonSet")}
    with_mps = any(name in cms or name in dss for name in MPS_SET)
    if (len(cms), len(dss)) not in ((2, 2), (3, 4)):
        v.errors.append(
            _(
                "Expected two ConfigMaps and two DaemonSets, or with MPS three ConfigMaps and four "
                "DaemonSets, found %(c)d and %(d)d."
            )
            % {"c": len(cms), "d": len(dss)}
        )
    wanted = {"none": DEFAULT_DAEMONSET, "timeslicing": TS_DAEMONSET}
    if with_mps:
        wanted["mps"] = MPS_DAEMONSET
    tolerations = {}
    for value, name in wanted.items():
        ds = dss.get(name)
        if ds is None:
            v.errors.append(_("DaemonSet %(name)s is missing.") % {"name": name})
            continue
        spec = (ds.get("spec") or {}).get("template", {}).get("spec") or {}
        selector = spec.get("nodeSelector") or {}
        if selector.get(SHARING_LABEL) != value:
            v.errors.append(
                _("DaemonSet %(name)s must select nodes with nodeSelector %(label)s=%(value)s (found %(found)s).")
                % {
                    "name": name,
                    "label": SHARING_LABEL,
                    "value": value,
                    "found": selector.get(SHARING_LABEL, _("none")),
                }
            )
        tolerations[name] = spec.get("tolerations") or []
        _mounts_a_configmap(ds, cms, v)
    if with_mps:
        _validate_mps(cms, dss, v, tolerations)
    if len({_toleration_key(t) for t in tolerations.values()}) > 1:
        v.errors.append(
            _(
                "The DaemonSets must have identical tolerations; otherwise the plugin of one "
                "mode is not scheduled on tainted nodes and their GPUs disappear."
            )
        )
    ts = cms.get(TS_CONFIGMAP)
    if ts is None:
        v.errors.append(_("ConfigMap %(name)s is missing.") % {"name": TS_CONFIGMAP})
    else:
        try:
            cfg = _config(ts)
        except (yaml.YAMLError, RecursionError):
            return  # refused_configs said so
        if not isinstance(cfg, dict):
            v.errors.append(_("%(name)s: config.yaml is not a mapping.") % {"name": TS_CONFIGMAP})
            return
        flags = cfg.get("flags") or {}
        slicing = time_slicing(cfg)
        if "renameByDefault" in flags:
            v.errors.append(_("renameByDefault is under flags; it belongs under sharing.timeSlicing."))
        if slicing.get("renameByDefault") is not True:
            v.errors.append(
                _(
                    "sharing.timeSlicing.renameByDefault must be true (shared GPUs are "
                    "nvidia.com/gpu.shared; without it quotas cannot tell the types apart)."
                )
            )
        if slicing.get("failRequestsGreaterThanOne") is not True:
            v.warnings.append(_("sharing.timeSlicing.failRequestsGreaterThanOne should be true."))
        replicas = ts_replicas(docs)
        if replicas is None:
            v.errors.append(_("No time-slicing replicas for nvidia.com/gpu."))
        elif replicas < 2:
            v.errors.append(_("Time-slicing replicas must be at least 2 (found %(n)d).") % {"n": replicas})


def _toleration_key(tolerations: list) -> tuple:
    return tuple(sorted(tuple(sorted((k, str(x)) for k, x in t.items())) for t in tolerations))


def _mounts_a_configmap(ds: dict, cms: dict, v: Validation) -> None:
    name = ds["metadata"]["name"]
    spec = (ds.get("spec") or {}).get("template", {}).get("spec") or {}
    cm_names = [vol["configMap"]["name"] for vol in spec.get("volumes") or [] if "configMap" in vol]
    if not cm_names or cm_names[0] not in cms:
        v.errors.append(_("DaemonSet %(name)s must mount a ConfigMap defined in this file.") % {"name": name})
    sel = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    tmpl_labels = ((ds["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not sel or any(tmpl_labels.get(k) != val for k, val in sel.items()):
        v.errors.append(_("DaemonSet %(name)s: spec.selector must match the pod template labels.") % {"name": name})


def _validate_mps(cms: dict, dss: dict, v: Validation, tolerations: dict) -> None:
    """The MPS ConfigMap shares nvidia.com/gpu by MPS (replicas >= 2, renamed), and NVIDIA's MPS
    control daemon runs where the conversions set nvidia.com/mps.capable=true, reading it too."""
    for name in (MPS_CONFIGMAP,):
        if name not in cms:
            v.errors.append(_("ConfigMap %(name)s is missing.") % {"name": name})
    daemon = dss.get(MPS_CONTROL_DAEMONSET)
    if daemon is None:
        v.errors.append(_("DaemonSet %(name)s is missing.") % {"name": MPS_CONTROL_DAEMONSET})
    else:
        spec = (daemon.get("spec") or {}).get("template", {}).get("spec") or {}
        if str((spec.get("nodeSelector") or {}).get(MPS_CAPABLE_LABEL)) != "true":
            v.errors.append(
                _("DaemonSet %(name)s must select nodes with nodeSelector %(label)s=true.")
                % {"name": MPS_CONTROL_DAEMONSET, "label": MPS_CAPABLE_LABEL}
            )
        tolerations[MPS_CONTROL_DAEMONSET] = spec.get("tolerations") or []
        _mounts_a_configmap(daemon, cms, v)
    cm = cms.get(MPS_CONFIGMAP)
    if cm is None:
        return
    try:
        cfg = _config(cm)
    except (yaml.YAMLError, RecursionError):
        return  # refused_configs said so
    mps = ((cfg.get("sharing") or {}).get("mps") or {}) if isinstance(cfg, dict) else {}
    if mps.get("renameByDefault") is not True:
        v.errors.append(
            _(
                "sharing.mps.renameByDefault must be true (shared GPUs are nvidia.com/gpu.shared; "
                "without it quotas cannot tell the types apart)."
            )
        )
    replicas = mps_configmap_replicas(list(cms.values()))
    if replicas is None:
        v.errors.append(_("No MPS replicas for nvidia.com/gpu."))
    elif replicas < 2:
        v.errors.append(_("MPS replicas must be at least 2 (found %(n)d).") % {"n": replicas})


def set_replicas(content: str, replicas: int) -> str:
    """The content with the time-slicing replicas changed; the rest of the text (comments
    included) is kept as it is."""
    marker = content.find(f"name: {TS_CONFIGMAP}")
    if marker < 0:
        raise ManifestError(_("ConfigMap %(name)s not found") % {"name": TS_CONFIGMAP})
    head, tail = content[:marker], content[marker:]
    new_tail, n = re.subn(r"(\breplicas:\s*)\d+", rf"\g<1>{int(replicas)}", tail, count=1)
    if not n:
        raise ManifestError(_("No replicas field in %(name)s") % {"name": TS_CONFIGMAP})
    out = head + new_tail
    if ts_replicas(parse(out)) != int(replicas):
        raise ManifestError(_("Could not set replicas in the manifest"))
    return out


def toleration_for(taint: dict) -> dict:
    """The toleration of exactly this taint (key, value, effect)."""
    tol = {"key": taint.get("key", ""), "operator": "Equal" if taint.get("value") else "Exists"}
    if taint.get("value"):
        tol["value"] = taint["value"]
    if taint.get("effect"):
        tol["effect"] = taint["effect"]
    return tol


def daemonsets_tolerate(docs: list[dict], taint: dict) -> bool:
    """Whether every DaemonSet of the manifest tolerates the taint."""
    dss = _docs_of(docs, "DaemonSet")
    return bool(dss) and all(
        tolerates([taint], (((d.get("spec") or {}).get("template") or {}).get("spec") or {}).get("tolerations"))
        for d in dss
    )


def add_toleration(content: str, taint: dict) -> str:
    """The content with a toleration of ``taint`` added to both DaemonSets (they must stay
    identical: docs/operator-guide.md#the-device-plugin). The rest of the text, comments
    included, is kept: the toleration goes right under each ``tolerations:`` line; a
    DaemonSet without that line makes the documents be written out again instead."""
    docs = parse(content)
    if daemonsets_tolerate(docs, taint):
        return content
    tol = toleration_for(taint)
    item = [f"- key: {json.dumps(tol['key'])}", f"  operator: {tol['operator']}"]
    item += [f"  {k}: {json.dumps(tol[k])}" for k in ("value", "effect") if k in tol]
    out, added = [], 0
    for line in content.splitlines(keepends=True):
        out.append(line)
        bare = line.rstrip("\r\n")
        if bare.strip() == "tolerations:":
            indent = bare[: len(bare) - len(bare.lstrip())]
            out.extend(f"{indent}{x}\n" for x in item)
            added += 1
    new = "".join(out)
    if added == len(_docs_of(docs, "DaemonSet")) and daemonsets_tolerate(parse(new), taint):
        return new
    for d in _docs_of(docs, "DaemonSet"):
        spec = d.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
        spec["tolerations"] = list(spec.get("tolerations") or []) + [tol]
    return yaml.safe_dump_all(docs, sort_keys=False)


# --- drift ------------------------------------------------------------------


def subset_diff(desired, live, path="") -> list[str]:
    """Paths where ``live`` differs from ``desired`` (fields the API server adds are ignored)."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return [path or "/"]
        out = []
        for k, v in desired.items():
            out += subset_diff(v, live.get(k), f"{path}.{k}" if path else k)
        return out
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return [path]
        out = []
        for i, (a, b) in enumerate(zip(desired, live, strict=True)):
            out += subset_diff(a, b, f"{path}[{i}]")
        return out
    if desired is None or live is None:
        return [] if desired == live else [path]
    return [] if str(desired) == str(live) else [path]


@dataclass
class DriftItem:
    kind: str
    name: str
    state: str  # "in-sync" | "drifted" | "missing"
    paths: list[str] = field(default_factory=list)


def drift(docs: list[dict], gateway=None, *, live: dict | None = None) -> list[DriftItem]:
    """Desired vs live, per ConfigMap and DaemonSet of the manifest. The live objects are read
    through ``gateway``, or taken from ``live`` ({(kind, namespace, name): object}, e.g. the
    snapshot's) when given."""
    out = []
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        ns = d["metadata"].get("namespace", NAMESPACE)
        try:
            if live is not None:
                if kind not in ("ConfigMap", "DaemonSet"):
                    continue
                if (kind, ns, name) not in live:
                    raise NotFound(f"{kind} {ns}/{name}")
                live_obj = live[(kind, ns, name)]
            elif kind == "ConfigMap":
                live_obj = gateway.get_configmap(ns, name)
            elif kind == "DaemonSet":
                live_obj = gateway.get_daemonset(ns, name)
            else:
                continue
        except NotFound:
            out.append(DriftItem(kind, name, "missing"))
            continue
        want = {k: v for k, v in d.items() if k in ("data", "spec")}
        want["metadata"] = {"labels": d["metadata"].get("labels") or {}}
        paths = subset_diff(want, live_obj)
        out.append(DriftItem(kind, name, "drifted" if paths else "in-sync", paths))
    return out


# --- versions -----------------------------------------------------------------


def current():
    """The current ManifestVersion, seeding version 1 from the file on first use."""
    from .models import ManifestVersion

    v = ManifestVersion.objects.order_by("-version").first()
    if v is None:
        try:
            with transaction.atomic():
                v = ManifestVersion.objects.create(
                    version=1,
                    content=MANIFEST_FILE.read_text(),
                    actor_name="system",
                    note="brick-nvidia-device-plugin.yaml",
                )
        except IntegrityError:
            v = ManifestVersion.objects.order_by("-version").first()
    return v


def save_version(content: str, *, actor=None, actor_name="", note="", run=None):
    """A new version (validated); returns it. Raises ManifestError when invalid."""
    from .models import ManifestVersion

    result = validate(parse(content))
    if not result.ok:
        raise ManifestError("; ".join(result.errors))
    for _attempt in range(5):
        latest = current()
        if latest.content == content:
            return latest
        try:
            with transaction.atomic():
                return ManifestVersion.objects.create(
                    version=latest.version + 1,
                    content=content,
                    actor=actor,
                    actor_name=actor_name or (actor.get_username() if actor else ""),
                    note=note,
                    run=run,
                )
        except IntegrityError:
            continue
    raise ManifestError(_("Another change to the manifest was saved at the same time; try again."))


def apply(docs: list[dict], gateway) -> list[str]:
    """Server-side apply every document. A DaemonSet whose selector changed is deleted and
    re-created. Returns one line per object (what was done). Refuses, before applying any,
    when a document is not the device plugin's own, or holds a config the plugin refuses
    (ManifestError naming it)."""
    refused = foreign_documents(docs) or refused_configs(docs)
    if refused:
        raise ManifestError(" ".join(refused))
    lines = []
    for d in docs:
        kind, name = d["kind"], d["metadata"]["name"]
        ns = d["metadata"].get("namespace")
        if kind == "DaemonSet":
            try:
                live = gateway.get_daemonset(ns, name)
                if (live.get("spec") or {}).get("selector") != d["spec"].get("selector"):
                    gateway.delete(d.get("apiVersion", "apps/v1"), kind, name, ns)
                    lines.append(f"daemonset.apps/{name} deleted (spec.selector is immutable)")
            except NotFound:
                pass
        try:
            gateway.apply(d, field_manager="brickadmin")
        except PermanentClusterError as exc:
            if kind == "DaemonSet" and exc.status == 422 and "selector" in str(exc):
                gateway.delete(d.get("apiVersion", "apps/v1"), kind, name, ns)
                lines.append(f"daemonset.apps/{name} deleted (spec.selector is immutable)")
                gateway.apply(d, field_manager="brickadmin")
            else:
                raise
        group = {"DaemonSet": "daemonset.apps", "ConfigMap": "configmap", "Namespace": "namespace"}.get(
            kind, kind.lower()
        )
        lines.append(f"{group}/{name} serverside-applied")
    return lines
