"""DRA's CEL selectors, evaluated as Kubernetes evaluates them.

Rows ported from k8s.io/dynamic-resource-allocation v0.34.4, cel/compile_test.go
(``testcases``), with their names, devices and outcomes (a compile error, an evaluation
error, or the match). Not ported: the cost estimates and ``expensive`` (the twin sets no
cost limit), ``split_attribute`` and ``regexp_attribute`` (CEL's strings extension and
regular expressions are not in the twin's evaluator), ``allow_multiple_allocations_new`` /
``_enabled`` / ``_disabled`` (environment versions and feature gates). Then rows of our own
for what NVIDIA's classes and the twin-versus-lab claims use.
"""

from __future__ import annotations

from typing import Any

import pytest

from brickadmin.cluster.dra_cel import CompileError, EvalError, compile_selector

D = "dra.example.com"

# name: (expression, driver, device, expected: bool | ("compile", text) | ("eval", text))
ROWS: dict[str, tuple[str, str, dict[str, Any], Any]] = {
    "true": ("true", "", {}, True),
    "false": ("false", "", {}, False),
    "syntax-error": ("?!", "", {}, ("compile", "Syntax error")),
    "type-error": ("1", "", {}, ("compile", "must evaluate to bool or the unknown type, not int")),
    "runtime-error-lookup-identifier": (
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        "",
        {},
        ("eval", "no such key: noSuchAttr"),
    ),
    "runtime-error-lookup-map": (
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        "",
        {},
        ("eval", "no such key: noSuchAttr"),
    ),
    "domain-check-negative": ('"no-such-domain" in device.attributes', "", {}, False),
    "domain-check-positive": (
        '"dra.example.com" in device.attributes',
        "",
        {"attributes": {"dra.example.com/something": {"bool": True}}},
        True,
    ),
    "empty-driver-name": ('device.driver == ""', "", {}, True),
    "real-driver-name": ('device.driver == "dra.example.com"', D, {}, True),
    "driver-name-qualifier": (f'device.attributes["{D}"].name', D, {"attributes": {"name": {"bool": True}}}, True),
    "driver-name-qualifier-map-lookup": (
        f'device.attributes["{D}"]["name"]',
        D,
        {"attributes": {"name": {"bool": True}}},
        True,
    ),
    "bind": (
        f'cel.bind(dra, device.attributes["{D}"], dra.name)',
        D,
        {"attributes": {"name": {"bool": True}}},
        True,
    ),
    "qualified-attribute-name": (
        'device.attributes["other.example.com"].name',
        D,
        {"attributes": {"other.example.com/name": {"bool": True}}},
        True,
    ),
    "bool": (f'device.attributes["{D}"].name', D, {"attributes": {"name": {"bool": True}}}, True),
    "int": (f'device.attributes["{D}"].name > 0', D, {"attributes": {"name": {"int": 1}}}, True),
    "string": (f'device.attributes["{D}"].name == "fish"', D, {"attributes": {"name": {"string": "fish"}}}, True),
    "version": (
        f'device.attributes["{D}"].name.isGreaterThan(semver("0.0.1"))',
        D,
        {"attributes": {"name": {"version": "1.0.0"}}},
        True,
    ),
    "version_v": (
        f'device.attributes["{D}"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
        D,
        {"attributes": {"name": {"version": "1.0.0"}}},
        True,
    ),
    "quantity": (
        f'device.capacity["{D}"].name.isGreaterThan(quantity("1Ki"))',
        D,
        {"capacity": {"name": {"value": "1Mi"}}},
        True,
    ),
    "check-positive": (
        f'"name" in device.capacity["{D}"] && device.capacity["{D}"].name.isGreaterThan(quantity("1Ki"))',
        D,
        {"capacity": {"name": {"value": "1Mi"}}},
        True,
    ),
    "check-negative": (
        f'!("name" in device.capacity["{D}"]) || device.capacity["{D}"].name.isGreaterThan(quantity("1Ki"))',
        "",
        {},
        True,
    ),
    "all": (
        " && ".join(
            [
                f'device.capacity["{D}"].quantity.isGreaterThan(quantity("1Ki"))',
                f'device.attributes["{D}"].bool',
                f'device.attributes["{D}"].int > 0',
                f'device.attributes["{D}"].string == "fish"',
                f'device.attributes["{D}"].version.isGreaterThan(semver("0.0.1"))',
                f'device.capacity["{D}"]["quantity"].isGreaterThan(quantity("1Ki"))',
                f'device.attributes["{D}"]["bool"]',
                f'device.attributes["{D}"]["int"] > 0',
                f'device.attributes["{D}"]["string"] == "fish"',
                f'device.attributes["{D}"]["version"].isGreaterThan(semver("0.0.1"))',
            ]
        ),
        D,
        {
            "attributes": {
                "bool": {"bool": True},
                "int": {"int": 1},
                "string": {"string": "fish"},
                "version": {"version": "1.0.0"},
            },
            "capacity": {"quantity": {"value": "1Mi"}},
        },
        True,
    ),
    "many": (
        " && ".join(f'device.attributes["{D}"].{a}' for a in "abc"),
        D,
        {"attributes": {a: {"bool": True} for a in "abc"}},
        True,
    ),
    "check_attribute_domains": (
        'device.attributes.exists_one(x, x == "dra.example.com")',
        D,
        {"attributes": {"services": {"string": "some_example_value"}}},
        True,
    ),
    "check_attribute_ids": (
        f'device.attributes["{D}"].exists_one(x, x == "services")',
        D,
        {"attributes": {"services": {"string": "some_example_value"}}},
        True,
    ),
    "check_capacity_domains": (
        'device.capacity.exists_one(x, x == "dra.example.com")',
        D,
        {"capacity": {"memory": {"value": "1Mi"}}},
        True,
    ),
    "check_capacity_ids": (
        f'device.capacity["{D}"].exists_one(x, x == "memory")',
        D,
        {"capacity": {"memory": {"value": "1Mi"}}},
        True,
    ),
    "allow_multiple_allocations": (
        "device.allowMultipleAllocations == true",
        D,
        {"allowMultipleAllocations": True},
        True,
    ),
    "allow_multiple_allocations_default": ("device.allowMultipleAllocations == false", D, {}, True),
    "allow_multiple_allocations_false": (
        "device.allowMultipleAllocations == false",
        D,
        {"allowMultipleAllocations": False},
        True,
    ),
}

G = "gpu.nvidia.com"
A100 = {
    "attributes": {
        "type": {"string": "gpu"},
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "driverVersion": {"version": "550.54.15"},
        "index": {"int": 0},
    },
    "capacity": {"memory": {"value": "80Gi"}},
}
OURS: dict[str, tuple[str, str, dict[str, Any], Any]] = {
    "nvidia-gpu-class": (f"device.driver == '{G}' && device.attributes['{G}'].type == 'gpu'", G, A100, True),
    "nvidia-mig-class-on-a-gpu": (f"device.driver == '{G}' && device.attributes['{G}'].type == 'mig'", G, A100, False),
    "memory-compare-to": (f"device.capacity['{G}'].memory.compareTo(quantity('40Gi')) > 0", G, A100, True),
    "memory-is-less-than": (f"device.capacity['{G}'].memory.isLessThan(quantity('40Gi'))", G, A100, False),
    "product-name-or": (
        f"device.attributes['{G}'].productName == 'NVIDIA H100' || "
        f"device.attributes['{G}'].productName.startsWith('NVIDIA A100')",
        G,
        A100,
        True,
    ),
    "string-functions": (
        f"device.attributes['{G}'].productName.lowerAscii().contains('a100') && "
        f"device.attributes['{G}'].productName.endsWith('80GB')",
        G,
        A100,
        True,
    ),
    "in-a-list": (f"device.attributes['{G}'].productName in ['NVIDIA H100', 'NVIDIA A100-SXM4-80GB']", G, A100, True),
    "ternary-and-not": (
        f"device.attributes['{G}'].index != 0 ? false : !(device.attributes['{G}'].index > 3)",
        G,
        A100,
        True,
    ),
    "semver-major": (f"device.attributes['{G}'].driverVersion.major() >= 550", G, A100, True),
    "semver-prerelease-below-release": ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", G, A100, True),
    "or-decided-despite-an-error": (f"device.attributes['{G}'].missing == 1 || true", G, A100, True),
    "and-decided-despite-an-error": (f"false && device.attributes['{G}'].missing == 1", G, A100, False),
    "error-not-hidden-by-true-and": (
        f"true && device.attributes['{G}'].missing == 1",
        G,
        A100,
        ("eval", "no such key: missing"),
    ),
    "string-to-int-is-no-match": (f"device.attributes['{G}'].productName == 1", G, A100, False),
    "string-ordered-against-int": (f"device.attributes['{G}'].productName < 1", G, A100, ("eval", "no such overload")),
    "driver-compared-to-int": ("device.driver == 1", G, A100, ("compile", "found no matching overload for '_==_'")),
    "unknown-variable": ("gpu.type == 'a'", G, A100, ("compile", "undeclared reference to 'gpu'")),
    "unknown-device-field": ("device.name == 'gpu-0'", G, A100, ("compile", "undefined field 'name'")),
    "regular-expressions-are-not-here": ("device.driver.matches('^gpu')", G, A100, ("compile", "matches")),
    "bad-quantity": ("quantity('80 Gi').sign() > 0", G, A100, ("eval", "quantities must match")),
}


@pytest.mark.parametrize("name", [*ROWS, *OURS])
def test_selector(name):
    expression, driver, device, want = {**ROWS, **OURS}[name]
    if isinstance(want, tuple) and want[0] == "compile":
        with pytest.raises(CompileError) as e:
            compile_selector(expression)
        assert want[1] in str(e.value)
        return
    program = compile_selector(expression)
    if isinstance(want, tuple):
        with pytest.raises(EvalError) as e2:
            program.matches(device, driver)
        assert want[1] in str(e2.value)
        return
    assert program.matches(device, driver) is want
