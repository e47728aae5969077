"""A scenario loaded into an empty twin, copied instead of loaded again.

Loading a scenario parses its YAML and writes each object, its event and the controllers'
work (plugin pods, kubelet status) one query at a time: seconds per test. A test process
loads each scenario for real once, keeps the rows that load wrote, and copies them into
the next test's empty twin in a few bulk inserts. The copy is the state the load would have
left, with fresh uids, a fresh twin version and the current time as creationTimestamp;
only the random suffixes of the plugin pods' names repeat from one test to the next.
A twin that holds anything already is loaded for real, as load() replaces it, and so is
any scenario while a test has replaced something of the twin's code (a monkeypatch).
"""

from __future__ import annotations

import json
import re
import types
import uuid

from django.db import transaction

from brickadmin.cluster import deviceplugin, migparted, scenarios, twin_api, twin_controllers, twin_store
from brickadmin.cluster import twin as twin_mod
from brickadmin.cluster.models import TwinEvent, TwinHardware, TwinObject, TwinState
from brickadmin.cluster.twin import TwinGateway

# The twin's modules that make uids and read the time (each has its own ``uuid`` and ``now_iso``).
_TWIN_MODULES = (twin_store, twin_controllers, twin_api)

# What the recorded load wrote for "now" and for each new uid; replaced by the real ones on
# each copy. The timestamp is a valid one (nothing during a load reads it back).
_RECORDED_NOW = "2001-02-03T04:05:06Z"
_UID_TAIL = "5ce7-4a11-8b0c-5ce7a110c0de"
_RECORDED_UID = re.compile(r"[0-9a-f]{8}-" + _UID_TAIL + "|[0-9a-f]{8}" + _UID_TAIL.replace("-", ""))

_recorded: dict[str, str] = {}  # scenario name -> the rows its load wrote, as JSON


def _twin_code() -> dict[str, object]:
    """What a load runs: the twin's modules, its gateway class and its parts, and the device plugin's model."""
    return {
        f"{space.__name__}.{name}": value
        for space in (twin_mod, *_TWIN_MODULES, *TwinGateway.__mro__[:-1], deviceplugin, migparted)
        for name, value in vars(space).items()
    }


_AS_IMPORTED = _twin_code()


def _code_as_imported() -> bool:
    now = _twin_code()
    return now.keys() == _AS_IMPORTED.keys() and all(now[k] is v for k, v in _AS_IMPORTED.items())


class _Rollback(Exception):
    pass


def _record(name: str) -> str:
    """Load ``name`` into the (empty) twin with recognisable uids and time, read back the
    rows, and undo the load."""
    counter = iter(range(1, 1 << 32))
    recorded_uuid = types.SimpleNamespace(
        uuid4=lambda: uuid.UUID(f"{next(counter):05x}000-{_UID_TAIL}")
    )  # pod name suffixes (hex[:5]) stay distinct
    saved = [(module, module.uuid, module.now_iso) for module in _TWIN_MODULES]
    for module in _TWIN_MODULES:
        module.uuid, module.now_iso = recorded_uuid, lambda: _RECORDED_NOW
    try:
        with transaction.atomic():
            TwinGateway().load(*scenarios.read(name))
            rows = {
                "objects": list(
                    TwinObject.objects.order_by("id").values(
                        "kind", "namespace", "name", "body", "node_name", "holds_gpu"
                    )
                ),
                "events": list(
                    TwinEvent.objects.order_by("id").values("id", "kind", "namespace", "name", "type", "body")
                ),
                "hardware": list(
                    TwinHardware.objects.order_by("id").values("node", "gpus", "plugin_pod_uid", "advertised")
                ),
                "state": list(TwinState.objects.values("id", "version", "last_rv", "compacted_rv")),
            }
            raise _Rollback
    except _Rollback:
        pass
    finally:
        for module, saved_uuid, saved_now in saved:
            module.uuid, module.now_iso = saved_uuid, saved_now
    return json.dumps(rows)


def _twin_is_empty() -> bool:
    return not any(m.objects.exists() for m in (TwinState, TwinObject, TwinEvent, TwinHardware))


def load(name: str) -> TwinGateway:
    """The twin with scenario ``name`` loaded; returns its gateway."""
    gw = TwinGateway()
    if not _code_as_imported() or not _twin_is_empty():
        gw.load(*scenarios.read(name))
        return gw
    if name not in _recorded:
        _recorded[name] = _record(name)
    fresh: dict[str, str] = {}

    def fresh_uid(match: re.Match) -> str:
        recorded = match.group(0)
        if recorded not in fresh:
            new = uuid.uuid4()
            fresh[recorded] = str(new) if "-" in recorded else new.hex
        return fresh[recorded]

    text = _RECORDED_UID.sub(fresh_uid, _recorded[name]).replace(_RECORDED_NOW, twin_mod.now_iso())
    rows = json.loads(text)
    with transaction.atomic():
        TwinState.objects.bulk_create(TwinState(**r) for r in rows["state"])
        TwinHardware.objects.bulk_create(TwinHardware(**r) for r in rows["hardware"])
        TwinObject.objects.bulk_create(TwinObject(**r) for r in rows["objects"])
        TwinEvent.objects.bulk_create(TwinEvent(**r) for r in rows["events"])
    return gw
