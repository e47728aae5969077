"""The usage arithmetic: what the devices' measured readings come to."""

from __future__ import annotations

from typing import Any


def usage_of(devices: dict[str, list[Any]]) -> tuple[float | None, float | None]:
    """(mean utilisation, memory used) of some devices, each counted once; None: not measured."""
    if not devices:
        return None, None
    util = [u for u, _m in devices.values()]
    mem = [m for _u, m in devices.values() if m is not None]
    return sum(util) / len(util), (sum(mem) if mem else None)
