"""Whether NVIDIA's k8s-device-plugin loads a config file, and if not, why: pure.

A port of what the plugin checks when it starts (``api/config/v1``: config.go, flags.go,
replicas.go, resources.go, sharing.go, imex.go, duration.go, consts.go, strategy.go, and
``validateFlags`` in cmd/nvidia-device-plugin/main.go). The plugin reads the file with
sigs.k8s.io/yaml (YAML to JSON, then Go's encoding/json, not strict), logs the first
reason and exits: its pod crash-loops and registers nothing with kubelet.

What it implies, ported here:
* unknown fields are ignored (no DisallowUnknownFields); the names of plain struct fields
  match case-insensitively (encoding/json), those read by the plugin's own UnmarshalJSON
  (the ``sharing.*`` sections, ``resources.gpus/mig``) only exactly;
* a YAML number or boolean given where a plain string is expected becomes that string
  (sigs.k8s.io/yaml), and a YAML float with no fraction is an integer (2.0 is 2);
* ``null`` leaves a plain field unset, but reaches the plugin's own checks as is.

The flags are judged as the BRICK DaemonSets run the plugin: ``--config-file`` only, so a
flag the file does not set keeps the plugin's command-line default.
"""

from __future__ import annotations

import functools
import json
import math

from .vocabulary import dns1123_subdomain_shaped

NVIDIA_PREFIX = "nvidia.com/"  # consts.go ResourceNamePrefix + "/"
MAX_RESOURCE_NAME_LENGTH = 63  # consts.go MaxResourceNameLength
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
ALLOCATION_POLICIES = ("distributed", "packed")
DEVICE_DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")

# k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain's message, word for word.
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_HEX = frozenset("0123456789abcdefABCDEF")

# The plain (non-pointer-to-custom) fields of flags.go, by JSON kind.
_FLAG_STRINGS = ("migStrategy", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot", "deviceDiscoveryStrategy")
_FLAG_BOOLS = ("failOnInitError", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI")
_PLUGIN_STRINGS = (
    "deviceIDStrategy",
    "cdiAnnotationPrefix",
    "nvidiaCTKPath",
    "containerDriverRoot",
    "sharedDevicesAllocationPolicy",
)
_GFD_STRINGS = ("outputFile", "machineTypeFile")
_GFD_BOOLS = ("oneshot", "noTimestamp")


def gettext_noop(message: str) -> str:
    """Marks a sentence for translation; it is translated when the reason is worded, so a
    reason kept from an earlier call speaks the language of the request that shows it."""
    return message


def _(message: str) -> str:
    """Django's gettext in the console; the English text where Django is not set up (lab/gpusim)."""
    try:
        from django.conf import settings
        from django.core.exceptions import AppRegistryNotReady
        from django.utils.translation import gettext
    except ImportError:
        return message
    if not settings.configured:
        return message
    try:
        return gettext(message)
    except AppRegistryNotReady:  # settings read, but Django not set up
        return message


class _Refusal(Exception):
    """One reason the plugin gives: where in the file, a sentence for the admin, and the
    plugin's own words."""

    def __init__(self, where: str, why: str, said: str):
        super().__init__(said)
        self.where, self.why, self.said = where, why, said

    def text(self) -> str:
        said = _('%(why)s The plugin says: "%(said)s".') % {"why": _(self.why), "said": self.said}
        return f"{self.where}: {said}" if self.where else said


_NESTED_TOO_DEEPLY = _Refusal(
    "", gettext_noop("The file is nested too deeply to be read."), "error converting YAML to JSON: nested too deeply"
)


def plugin_config_errors(config: str | dict | None) -> list[str]:
    """Why the device plugin refuses to load ``config`` (a ConfigMap's ``config.yaml``, or
    it parsed); [] when it loads it. An empty file loads (every setting at its default)."""
    refusals = _refusals_of_text(config) if isinstance(config, str) else _refusals(config)
    return [r.text() for r in refusals]


@functools.lru_cache(maxsize=256)
def _refusals_of_text(config: str) -> tuple[_Refusal, ...]:
    # The simulators ask for every node at every sync, mostly about the same few files.
    return tuple(_refusals(config))


def _refusals(config) -> list[_Refusal]:
    if config is None:
        return []
    if isinstance(config, str):
        import yaml  # here, so the module stays loadable without PyYAML (lab/lab.py)

        try:
            config = yaml.safe_load(config)
        except yaml.YAMLError as exc:
            return [_Refusal("", gettext_noop("The file is not valid YAML."), f"unmarshal error: {exc}")]
        except RecursionError:
            return [_NESTED_TOO_DEEPLY]
    out: list[_Refusal] = []
    try:
        config = _as_json(config)
    except _Refusal as r:
        return [r]
    except RecursionError:
        return [_NESTED_TOO_DEEPLY]
    if config is None:
        return []
    if not isinstance(config, dict):
        return [
            _type_refusal(
                "",
                config,
                "v1.Config",
                gettext_noop("The file must be a mapping of settings (version, flags, sharing...)."),
            )
        ]
    _check(out, _config, config)
    return out


def _check(out: list, fn, *args) -> None:
    try:
        fn(out, *args)
    except _Refusal as r:
        out.append(r)


# --- the JSON the plugin's decoder sees ---------------------------------------------------


def _as_json(value, where="", memo=None):
    """A YAML value as sigs.k8s.io/yaml hands it to encoding/json: a float with no fraction
    is an integer; a value JSON cannot hold is refused. A node that YAML aliases is converted
    once and shared, so a small file of nested aliases does not grow into a huge one here."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Refusal(where, gettext_noop("a number must be finite."), f"json: unsupported value: {value}")
        return int(value) if value == int(value) else value
    if not isinstance(value, (dict, list, tuple)):
        return str(value)  # a YAML timestamp or binary: the plugin reads it as a string
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, dict):
        out = memo[id(value)] = {}
        for k, v in value.items():
            key = k if isinstance(k, str) else str(k)
            out[key] = _as_json(v, f"{where}.{key}" if where else key, memo)
        return out
    out = memo[id(value)] = []
    out.extend(_as_json(v, f"{where}[{i}]", memo) for i, v in enumerate(value))
    return out


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _compact(value, limit: int = 200) -> str:
    """The JSON text of ``value`` as the plugin quotes it, cut after ``limit`` characters
    (aliases would repeat a shared part as often as it is used)."""
    pieces: list[str] = []
    budget = [limit]

    def put(text: str) -> None:
        pieces.append(text[: budget[0]])
        budget[0] -= len(text)
        if budget[0] <= 0:
            raise StopIteration

    def walk(v, depth: int) -> None:
        if depth > 20:
            put("...")
        elif isinstance(v, dict):
            put("{")
            for i, (k, x) in enumerate(v.items()):
                put(("," if i else "") + json.dumps(k, ensure_ascii=False) + ":")
                walk(x, depth + 1)
            put("}")
        elif isinstance(v, list):
            put("[")
            for i, x in enumerate(v):
                put("," if i else "")
                walk(x, depth + 1)
            put("]")
        else:
            put(json.dumps(v, ensure_ascii=False))

    try:
        walk(value, 0)
    except StopIteration:
        return "".join(pieces) + "..."
    return "".join(pieces)


def _type_refusal(where: str, value, go_type: str, why: str) -> _Refusal:
    return _Refusal(where, why, f"json: cannot unmarshal {_kind(value)} into Go value of type {go_type}")


def _fields(obj: dict, names) -> list[tuple[str, str, object]]:
    """(field, key as written, value) of a plain Go struct: encoding/json matches a key to a
    field case-insensitively; a key that matches none is ignored."""
    by_fold = {n.lower(): n for n in names}
    return [(by_fold[k.lower()], k, v) for k, v in obj.items() if k.lower() in by_fold]


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _plain_string(where: str, value) -> str | None:
    """A plain string field: null leaves it unset; a number or boolean becomes its text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise _type_refusal(where, value, "string", gettext_noop("must be a string."))


def _plain_bool(where: str, value) -> None:
    if value is not None and not isinstance(value, bool):
        raise _type_refusal(where, value, "bool", gettext_noop("must be true or false."))


def _object(where: str, value, go_type: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _type_refusal(where, value, go_type, gettext_noop("must be a mapping."))
    return value


# --- config.go ------------------------------------------------------------------------------


def _config(out: list, cfg: dict) -> None:
    flags = {}
    sharing = {}
    for field_, key, value in _fields(cfg, ("version", "flags", "resources", "sharing", "imex")):
        if field_ == "version":
            version = _plain_string(key, value) or "v1"
            if version != "v1":
                out.append(_Refusal(key, gettext_noop('only version "v1" exists.'), f"unknown version: {version}"))
        elif field_ == "flags":
            _check(out, _flags, key, value, flags)
        elif field_ == "resources":
            _check(out, _resources, key, value)
        elif field_ == "sharing":
            _check(out, _sharing, key, value, sharing)
        else:
            _check(out, _imex, key, value)
    if not out:
        _check(out, _validate_flags, flags, sharing)


# --- flags.go -------------------------------------------------------------------------------


def _flags(out: list, where: str, value, seen: dict) -> None:
    value = _object(where, value, "v1.Flags")
    names = _FLAG_STRINGS + _FLAG_BOOLS + ("plugin", "gfd")
    for field_, key, v in _fields(value, names):
        at = _at(where, key)
        if field_ in _FLAG_STRINGS:
            seen[field_] = _plain_string(at, v)
        elif field_ in _FLAG_BOOLS:
            _plain_bool(at, v)
        elif field_ == "plugin":
            _check(out, _plugin_flags, at, v, seen)
        else:
            _check(out, _gfd_flags, at, v)


def _plugin_flags(out: list, where: str, value, seen: dict) -> None:
    value = _object(where, value, "v1.PluginCommandLineFlags")
    for field_, key, v in _fields(value, _PLUGIN_STRINGS + ("passDeviceSpecs", "deviceListStrategy")):
        at = _at(where, key)
        if field_ in _PLUGIN_STRINGS:
            seen[field_] = _plain_string(at, v)
        elif field_ == "passDeviceSpecs":
            _plain_bool(at, v)
        elif v is not None:  # deviceListStrategyFlag.UnmarshalJSON: a string or a list of strings
            if isinstance(v, str):
                seen[field_] = [v]
            elif isinstance(v, list) and all(isinstance(s, str) for s in v):
                seen[field_] = v
            else:
                raise _Refusal(
                    at,
                    gettext_noop("must be a strategy name or a list of them."),
                    f"invalid deviceListStrategy: {_compact(v)}",
                )


def _gfd_flags(out: list, where: str, value) -> None:
    value = _object(where, value, "v1.GFDCommandLineFlags")
    for field_, key, v in _fields(value, _GFD_STRINGS + _GFD_BOOLS + ("sleepInterval",)):
        at = _at(where, key)
        if field_ in _GFD_STRINGS:
            _plain_string(at, v)
        elif field_ in _GFD_BOOLS:
            _plain_bool(at, v)
        elif v is not None:
            _duration(at, v)


def _duration(where: str, value) -> None:
    """duration.go Duration.UnmarshalJSON: a number of nanoseconds, "infinite", or a Go
    duration string."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Refusal(where, gettext_noop("must be a duration such as 30s or 5m, or infinite."), "invalid duration")
    if isinstance(value, str) and value != "infinite" and not go_duration_is_valid(value):
        raise _Refusal(
            where,
            gettext_noop("must be a duration such as 30s or 5m, or infinite."),
            f'time: invalid duration "{value}"',
        )


_DURATION_UNITS = ("ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h")


def go_duration_is_valid(s: str) -> bool:
    """Whether Go's time.ParseDuration accepts ``s``: [-+]? then one or more <number><unit>,
    or "0". Overflow past 290 years is not checked."""
    if s[:1] in ("-", "+"):
        s = s[1:]
    if s == "0":
        return True
    if not s:
        return False
    i = 0
    while i < len(s):
        start = i
        while i < len(s) and s[i].isascii() and s[i].isdigit():
            i += 1
        whole = i > start
        if i < len(s) and s[i] == ".":
            i += 1
            frac_start = i
            while i < len(s) and s[i].isascii() and s[i].isdigit():
                i += 1
            if not whole and i == frac_start:
                return False
        elif not whole:
            return False
        unit_start = i
        while i < len(s) and s[i] != "." and not (s[i].isascii() and s[i].isdigit()):
            i += 1
        if s[unit_start:i] not in _DURATION_UNITS:
            return False
    return True


# --- resources.go -----------------------------------------------------------------------------


def _resources(out: list, where: str, value) -> None:
    """config.resources (the plugin ignores it after reading, with a warning; a malformed
    entry still stops it)."""
    value = _object(where, value, "v1.Resources")
    for _field, key, v in _fields(value, ("gpus", "mig")):
        at = _at(where, key)
        if v is None:
            continue
        if not isinstance(v, list):
            raise _type_refusal(at, v, "[]v1.Resource", gettext_noop("must be a list."))
        for i, item in enumerate(v):
            _check(out, _resource, f"{at}[{i}]", item)


def _resource(out: list, where: str, value) -> None:
    if value is None:
        value = {}  # Resource.UnmarshalJSON reads null as an empty mapping
    if not isinstance(value, dict):
        raise _type_refusal(where, value, "map[string]json.RawMessage", gettext_noop("must be a mapping."))
    if "pattern" not in value:
        raise _Refusal(where, gettext_noop("needs a pattern."), "resources must have a 'pattern' field set")
    if "name" not in value:
        raise _Refusal(where, gettext_noop("needs a name."), "resources must have a 'name' field set")
    if value["pattern"] is not None and not isinstance(value["pattern"], str):
        raise _type_refusal(
            _at(where, "pattern"), value["pattern"], "v1.ResourcePattern", gettext_noop("must be a string.")
        )
    _resource_name(_at(where, "name"), value["name"])


def resource_name_error(name: str) -> str | None:
    """resources.go NewResourceName: the plugin's reason a resource name is refused, or None.
    ``nvidia.com/`` is added when missing; at most 63 characters in all; the part after the
    first ``/`` a lowercase RFC 1123 subdomain."""
    full = name if name.startswith(NVIDIA_PREFIX) else NVIDIA_PREFIX + name
    if len(full.encode()) > MAX_RESOURCE_NAME_LENGTH:
        return f"fully-qualified resource name must be {MAX_RESOURCE_NAME_LENGTH} characters or less: {full}"
    problems = dns1123_subdomain_errors(full.split("/", 1)[1])
    if problems:
        return f"incorrect format for resource name '{full}': [{' '.join(problems)}]"
    return None


def dns1123_subdomain_errors(value: str) -> list[str]:
    """k8s.io/apimachinery IsDNS1123Subdomain, without a regular expression: dot-separated
    labels of [a-z0-9-], each starting and ending with [a-z0-9]."""
    errs = []
    if len(value.encode()) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not dns1123_subdomain_shaped(value):
        errs.append(_DNS1123_SUBDOMAIN_MSG)
    return errs


def _resource_name(where: str, value) -> str:
    """ResourceName.UnmarshalJSON: a string (null reads as ""), then NewResourceName."""
    if value is not None and not isinstance(value, str):
        raise _type_refusal(where, value, "string", gettext_noop("must be a resource name (a string)."))
    error = resource_name_error(value or "")
    if error:
        raise _Refusal(
            where,
            gettext_noop(
                "is not a valid resource name: at most 63 characters with the nvidia.com/ "
                "prefix, lowercase letters, digits, '-' and '.', starting and ending with a "
                "letter or digit."
            ),
            error,
        )
    return value if value.startswith(NVIDIA_PREFIX) else NVIDIA_PREFIX + value


def pattern_matches(pattern: str, name: str) -> bool:
    """resources.go ResourcePattern.Matches: ``*`` matches any run of characters, everything
    else itself, and the whole name must match."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == name
    if not name.startswith(parts[0]) or len(name) < len(parts[0]) + len(parts[-1]) or not name.endswith(parts[-1]):
        return False
    pos, end = len(parts[0]), len(name) - len(parts[-1])
    for middle in parts[1:-1]:
        found = name.find(middle, pos, end)
        if found < 0:
            return False
        pos = found + len(middle)
    return True


# --- sharing.go, replicas.go -------------------------------------------------------------------


def _sharing(out: list, where: str, value, seen: dict) -> None:
    value = _object(where, value, "v1.Sharing")
    for field_, key, v in _fields(value, ("timeSlicing", "mps")):
        at = _at(where, key)
        if field_ == "mps" and v is None:
            continue  # a nil *ReplicatedResources: no MPS
        _check(out, _replicated_resources, at, v)
        if field_ == "mps":
            seen["mps"] = True


def _replicated_resources(out: list, where: str, value) -> None:
    """replicas.go ReplicatedResources.UnmarshalJSON."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _type_refusal(where, value, "map[string]json.RawMessage", gettext_noop("must be a mapping."))
    for key in ("renameByDefault", "failRequestsGreaterThanOne"):
        if key in value:
            _plain_bool(_at(where, key), value[key])
    resources = value.get("resources")
    at = _at(where, "resources")
    if resources is not None and not isinstance(resources, list):
        raise _type_refusal(at, resources, "[]v1.ReplicatedResource", gettext_noop("must be a list."))
    if not resources:
        raise _Refusal(at, gettext_noop("must list at least one resource to share."), "no resources specified")
    for i, item in enumerate(resources):
        _check(out, _replicated_resource, f"{at}[{i}]", item)


def _replicated_resource(out: list, where: str, value) -> None:
    """replicas.go ReplicatedResource.UnmarshalJSON: name, devices, replicas, rename, in
    that order; the first wrong one stops it."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise _type_refusal(where, value, "map[string]json.RawMessage", gettext_noop("must be a mapping."))
    if "name" not in value:
        raise _Refusal(
            where,
            gettext_noop("needs the name of the resource to share (e.g. nvidia.com/gpu)."),
            "no resource name specified",
        )
    _resource_name(_at(where, "name"), value["name"])
    _replicated_devices(_at(where, "devices"), value.get("devices", "all"))
    if "replicas" not in value:
        raise _Refusal(
            where, gettext_noop("needs replicas (how many pods share each device)."), "no replicas specified"
        )
    replicas = value["replicas"]
    at = _at(where, "replicas")
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int)):
        raise _type_refusal(at, replicas, "int", gettext_noop("must be a whole number, at least 2."))
    if (replicas or 0) < 2:
        raise _Refusal(
            at, gettext_noop("must be at least 2 (one replica is not sharing)."), "number of replicas must be >= 2"
        )
    if "rename" in value:
        _resource_name(_at(where, "rename"), value["rename"])


def _replicated_devices(where: str, value) -> None:
    """replicas.go ReplicatedDevices.UnmarshalJSON: "all", a count > 0, or a list of GPU
    indexes, MIG indexes (gpu:mig) and GPU or MIG UUIDs (kinds may be mixed)."""
    if value is None or isinstance(value, str):  # null reads as the string ""
        if value != "all":
            raise _Refusal(
                where,
                gettext_noop('must be "all", a number of devices, or a list of device indexes or UUIDs.'),
                f"devices set as '{value or ''}' but the only valid string input is 'all'",
            )
        return
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise _Refusal(
                where,
                gettext_noop("a number of devices must be at least 1."),
                f"devices set as '{value}' but a count of devices must be > 0",
            )
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            if item is None or (isinstance(item, int) and not isinstance(item, bool) and item >= 0):
                continue  # a uint64 index (null reads as 0)
            if isinstance(item, str) and device_ref_is_valid(item):
                continue
            raise _Refusal(
                f"{where}[{i}]",
                gettext_noop(
                    "is not a GPU index, a MIG index (gpu:mig), a GPU UUID "
                    "(GPU-<uuid>) or a MIG UUID (MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>)."
                ),
                f"unsupported type for device in devices list: {item if isinstance(item, str) else ''}, string",
            )
        return
    raise _Refusal(
        where,
        gettext_noop('must be "all", a number of devices, or a list of device indexes or UUIDs.'),
        f"unrecognized type for devices spec: {_compact(value)}",
    )


def _is_uint(s: str) -> bool:
    """strconv.ParseUint(s, 10, 0): decimal digits only, within 64 bits."""
    return bool(s) and s.isascii() and s.isdigit() and int(s) < 2**64


def is_gpu_index(ref: str) -> bool:
    return _is_uint(ref)


def is_mig_index(ref: str) -> bool:
    parts = ref.split(":", 1)
    return len(parts) == 2 and all(_is_uint(p) for p in parts)


def uuid_parses(s: str) -> bool:
    """github.com/google/uuid Parse: 36 characters with dashes at 8, 13, 18, 23; or that
    after "urn:uuid:" (any case); or that with one character either side (the braces are
    not checked); or 32 hex digits."""
    b = s.encode()
    if len(b) == 32:
        return all(chr(c) in _HEX for c in b)
    if len(b) == 45:
        if b[:9].lower() != b"urn:uuid:":
            return False
        b = b[9:]
    elif len(b) == 38:
        b = b[1:]
    elif len(b) != 36:
        return False
    if any(b[i] != ord("-") for i in (8, 13, 18, 23)):
        return False
    return all(
        chr(b[x]) in _HEX and chr(b[x + 1]) in _HEX for x in (0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34)
    )


def is_gpu_uuid(ref: str) -> bool:
    return ref.startswith("GPU-") and uuid_parses(ref[4:])


def is_mig_uuid(ref: str) -> bool:
    if not ref.startswith("MIG-"):
        return False
    suffix = ref[4:]
    if uuid_parses(suffix):
        return True
    parts = suffix.split("/", 2)
    return len(parts) == 3 and is_gpu_uuid(parts[0]) and all(_is_uint(p) for p in parts[1:])


def device_ref_is_valid(ref: str) -> bool:
    return is_gpu_index(ref) or is_mig_index(ref) or is_gpu_uuid(ref) or is_mig_uuid(ref)


# --- imex.go ------------------------------------------------------------------------------------


def _imex(out: list, where: str, value) -> None:
    value = _object(where, value, "v1.Imex")
    for field_, key, v in _fields(value, ("channelIDs", "required")):
        at = _at(where, key)
        if field_ == "required":
            _plain_bool(at, v)
            continue
        if v is None:
            continue
        if not isinstance(v, list):
            raise _type_refusal(at, v, "[]int", gettext_noop("must be a list of channel numbers."))
        for i, item in enumerate(v):
            if item is not None and (isinstance(item, bool) or not isinstance(item, int)):
                raise _type_refusal(f"{at}[{i}]", item, "int", gettext_noop("must be a channel number."))
        ids = [item or 0 for item in v]
        if ids not in ([], [0]):
            raise _Refusal(
                at,
                gettext_noop("must be [] or [0]."),
                "invalid IMEX channel IDs: invalid IMEX config: "
                f"channelIDs must be [] or [0]; found [{' '.join(map(str, ids))}]",
            )


# --- cmd/nvidia-device-plugin/main.go validateFlags ----------------------------------------------


def _validate_flags(out: list, flags: dict, sharing: dict) -> None:
    """The settings' values, after the whole file was read (the defaults are the plugin's
    command-line defaults). The plugin stops at the first; here each is reported."""
    for strategy in flags.get("deviceListStrategy") or []:
        if strategy not in DEVICE_LIST_STRATEGIES:
            out.append(
                _Refusal(
                    "flags.plugin.deviceListStrategy",
                    gettext_noop("must be envvar, volume-mounts, cdi-annotations or cdi-cri."),
                    f"invalid --device-list-strategy option: invalid strategy: {strategy}",
                )
            )
            break
    id_strategy = flags.get("deviceIDStrategy")
    if id_strategy is not None and id_strategy not in DEVICE_ID_STRATEGIES:
        out.append(
            _Refusal(
                "flags.plugin.deviceIDStrategy",
                gettext_noop("must be uuid or index."),
                f"invalid --device-id-strategy option: {id_strategy}",
            )
        )
    policy = flags.get("sharedDevicesAllocationPolicy")
    if policy is not None and policy not in ALLOCATION_POLICIES:
        out.append(
            _Refusal(
                "flags.plugin.sharedDevicesAllocationPolicy",
                gettext_noop("must be distributed or packed."),
                f"invalid --shared-devices-allocation-policy option: {policy}",
            )
        )
    mig_strategy = flags.get("migStrategy")
    if sharing.get("mps"):  # every MPS resource has replicas >= 2, so MPS is the sharing strategy
        if mig_strategy == "mixed":
            out.append(
                _Refusal(
                    "flags.migStrategy",
                    gettext_noop("MPS cannot be used with migStrategy mixed."),
                    "using --mig-strategy=mixed is not supported with MPS",
                )
            )
        if not flags.get("mpsRoot"):
            out.append(
                _Refusal(
                    "flags.mpsRoot",
                    gettext_noop("MPS needs mpsRoot (where the MPS daemon's files are)."),
                    "using MPS requires --mps-root to be specified",
                )
            )
    discovery = flags.get("deviceDiscoveryStrategy")
    if discovery is not None and discovery not in DEVICE_DISCOVERY_STRATEGIES:
        out.append(
            _Refusal(
                "flags.deviceDiscoveryStrategy",
                gettext_noop("must be auto, nvml or tegra."),
                f"invalid --device-discovery-strategy option {discovery}",
            )
        )
    if mig_strategy is not None and mig_strategy not in MIG_STRATEGIES:
        out.append(
            _Refusal(
                "flags.migStrategy",
                gettext_noop("must be none, single or mixed."),
                f"unknown MIG strategy: {mig_strategy}",
            )
        )
