"""No regular expression of the product backtracks on a long, hostile input.

Every pattern is found, not listed: the source of gpus/, workspaces/ and brickadmin/ is read
for ``re.<function>(...)`` calls, ``re.compile`` and ``RegexValidator``; module and class
attributes holding patterns are collected by importing the modules; the forms' and models'
``RegexValidator``s too. A call whose pattern cannot be resolved fails the test, so a new
pattern cannot slip past it. Each pattern then runs (the way the product runs it: match,
fullmatch, and search where the product searches) on 10,000-character adversarial inputs,
each call under 50 ms. The checks run in a child process so that a catastrophic pattern
fails the test after a few seconds instead of stalling it for minutes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import multiprocessing
import re
import time
from pathlib import Path

import pytest
from django import forms
from django.apps import apps
from django.core.validators import RegexValidator

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gpus", "workspaces", "brickadmin")
SKIP_MODULES = {"brickadmin.wsgi", "brickadmin.asgi"}
RE_FUNCS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}
SEARCHING = {"search", "sub", "subn", "split", "findall", "finditer"}
LIMIT_S = 0.050
N = 10_000


def product_files():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            yield path


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _attr_patterns(obj, seen, out, where, depth=0):
    """Patterns held by a module's or class's attributes (and nested classes')."""
    for name, value in list(vars(obj).items()):
        if isinstance(value, re.Pattern):
            out.setdefault(value, f"{where}.{name}")
        elif isinstance(value, RegexValidator):
            out.setdefault(value.regex, f"{where}.{name}")
        elif (
            inspect.isclass(value)
            and value not in seen
            and depth < 3
            and (getattr(value, "__module__", "") or "").split(".")[0] in PACKAGES
        ):
            seen.add(value)
            _attr_patterns(value, seen, out, f"{where}.{name}", depth + 1)
            if issubclass(value, forms.BaseForm):
                for fname, field in value.base_fields.items():
                    for v in field.validators:
                        if isinstance(v, RegexValidator):
                            out.setdefault(v.regex, f"{where}.{name}.{fname}")


def collect():
    """{compiled pattern: where} and {pattern string: set of call names used with it}."""
    patterns: dict[re.Pattern, str] = {}
    seen: set = set()
    unresolved = []
    searched: set[str] = set()
    modules = {}
    for path in product_files():
        name = module_name(path)
        if name in SKIP_MODULES:
            continue
        mod = importlib.import_module(name)
        modules[name] = mod
        _attr_patterns(mod, seen, patterns, name)
    for app in ("gpus", "workspaces", "auth"):
        for model in apps.get_app_config(app).get_models():
            for f in model._meta.get_fields():
                for v in getattr(f, "validators", []):
                    if isinstance(v, RegexValidator):
                        patterns.setdefault(v.regex, f"{model.__name__}.{f.name}")
    by_text = {p.pattern: p for p in patterns}
    # The source: every re.<function>(pattern, ...) and RegexValidator(pattern) call.
    for path in product_files():
        name = module_name(path)
        if name in SKIP_MODULES:
            continue
        mod = modules[name]
        tree = ast.parse(path.read_text(), str(path))
        assigned = {id(n.value): n.targets for n in ast.walk(tree) if isinstance(n, ast.Assign)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            is_re_call = (
                isinstance(fn, ast.Attribute)
                and isinstance(fn.value, ast.Name)
                and fn.value.id == "re"
                and fn.attr in RE_FUNCS
            )
            is_validator = (isinstance(fn, ast.Name) and fn.id in ("RegexValidator", "RegexField")) or (
                isinstance(fn, ast.Attribute) and fn.attr in ("RegexValidator", "RegexField")
            )
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if is_re_call or is_validator:
                arg = (
                    node.args[0]
                    if node.args
                    else next((k.value for k in node.keywords if k.arg in ("pattern", "regex")), None)
                )
                text = _resolve(arg, mod)
                if text is None and is_re_call and fn.attr == "compile":
                    # re.compile(f"...") assigned to a name: the compiled attribute holds it
                    for target in assigned.get(id(node), []):
                        text = _resolve(target, mod)
                if text is None:
                    unresolved.append(where)
                    continue
                if text not in by_text:
                    flags = 0
                    for k in node.keywords:
                        if k.arg == "flags":
                            flags = eval(compile(ast.Expression(k.value), where, "eval"), {"re": re})  # noqa: S307
                    by_text[text] = re.compile(text, flags)
                    patterns[by_text[text]] = where
                if is_re_call and fn.attr in SEARCHING:
                    searched.add(text)
            # PATTERN.search(...) on a compiled pattern attribute
            elif isinstance(fn, ast.Attribute) and fn.attr in SEARCHING:
                target = fn.value
                attr = (
                    target.id
                    if isinstance(target, ast.Name)
                    else (target.attr if isinstance(target, ast.Attribute) else None)
                )
                value = getattr(mod, attr, None) if attr else None
                if isinstance(value, re.Pattern):
                    searched.add(value.pattern)
    return patterns, searched, unresolved


def _resolve(arg, mod):
    """The pattern text of a call's first argument: a literal, or a module/class attribute."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    name = arg.id if isinstance(arg, ast.Name) else arg.attr if isinstance(arg, ast.Attribute) else None
    if name is None:
        return None
    candidates = [getattr(mod, name, None)] + [getattr(c, name, None) for c in vars(mod).values() if inspect.isclass(c)]
    for value in candidates:
        if isinstance(value, re.Pattern):
            return value.pattern
        if isinstance(value, str):
            return value
    return None


def adversarial_inputs(pattern: str) -> dict[str, str]:
    """10,000-character inputs that make backtracking patterns explode: runs of one
    character then a character that cannot match, alternating word and separator
    characters, long runs of separators, and the same built from the pattern's own
    literal characters."""
    out = {}
    specials = "_-./:@ \t,=!()+"
    chars = set(specials) | {c for c in pattern if c.isprintable() and not c.isalnum()} | set("a0Ag")
    for c in sorted(chars):
        out[f"a + {c!r}*n + '!'"] = ("a" + c * N)[: N - 1] + "!"
        out[f"(a{c!r})*n + '!'"] = (("a" + c) * N)[: N - 1] + "!"
        out[f"{c!r}*n"] = c * N
        out[f"(aa{c!r})*n + '\\x00'"] = (("aa" + c) * N)[: N - 1] + "\x00"
    for word in ("nvidia.com/gpu", "spec.nodeName=", "replicas: ", "x in (", "mig-1g.5gb", "ab", "a_b-c.d"):
        out[f"{word!r} repeated"] = (word * N)[: N - 1] + "!"
    out["word chars then '!'"] = "a" * (N - 1) + "!"
    out["digits then 'x'"] = "9" * (N - 1) + "x"
    out["spaces then 'x'"] = " " * (N - 1) + "x"
    out["unicode letters then '!'"] = "é" * (N - 1) + "!"
    return out


def _time_all(pattern, flags, search, conn):
    """In the child: time each call, report (label, seconds) as it goes."""
    compiled = re.compile(pattern, flags)
    calls = [("match", compiled.match), ("fullmatch", compiled.fullmatch)]
    if search:
        calls.append(("search", compiled.search))
    for label, text in adversarial_inputs(pattern).items():
        for call_name, call in calls:
            conn.send((f"{call_name}({label})", "start"))
            best = None
            for _ in range(3):  # best of three: a busy machine does not fail the test
                t0 = time.perf_counter()
                call(text)
                elapsed = time.perf_counter() - t0
                best = elapsed if best is None else min(best, elapsed)
            conn.send((f"{call_name}({label})", best))
    conn.send((None, None))
    conn.close()


def check_pattern(pattern: str, flags: int, search: bool, deadline_s: float = 10.0) -> list[str]:
    """Slow calls of one pattern (empty when all are fast). Runs in a child process that is
    killed after ``deadline_s``, so exponential backtracking reports instead of hanging."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_time_all, args=(pattern, flags, search, child), daemon=True)
    proc.start()
    child.close()
    slow, current, t_end = [], None, time.monotonic() + deadline_s
    try:
        while True:
            if not parent.poll(max(0.0, t_end - time.monotonic())):
                slow.append(f"{current}: did not finish within {deadline_s:.0f} s (catastrophic backtracking)")
                break
            try:
                label, value = parent.recv()
            except EOFError:
                slow.append(f"{current}: the child process died")
                break
            if label is None:
                break
            if value == "start":
                current = label
            elif value >= LIMIT_S:
                slow.append(f"{label}: {value * 1000:.0f} ms")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
    return slow


_COLLECTED = None


def collected():
    global _COLLECTED
    if _COLLECTED is None:
        _COLLECTED = collect()
    return _COLLECTED


def test_every_pattern_in_the_source_is_found():
    patterns, _searched, unresolved = collected()
    assert not unresolved, f"regular expressions whose pattern this test cannot find: {unresolved}"
    found = {p.pattern for p in patterns}
    # The patterns that check user input are among them (a sanity check of the discovery itself).
    from brickadmin.cluster import twin
    from workspaces import approvals, labels
    from workspaces import forms as ws_forms

    for p in (
        approvals.GPU_RESOURCE_RE,
        approvals.DNS1123_LABEL,
        labels.LABEL_VALUE_BAD,
        twin._LABEL_VALUE_RE,
        ws_forms.IMAGE_PATH_COMPONENT,
        ws_forms.IMAGE_DOMAIN,
    ):
        assert p.pattern in found


def _ids():
    try:
        return [f"{where}" for _p, where in collected()[0].items()]
    except Exception:  # collection errors are reported by the test above
        return []


@pytest.mark.parametrize("index", range(len(_ids())), ids=_ids())
def test_pattern_is_fast_on_adversarial_input(index):
    patterns, searched, _u = collected()
    pattern = list(patterns)[index]
    slow = check_pattern(pattern.pattern, pattern.flags, pattern.pattern in searched)
    assert not slow, f"{patterns[pattern]} /{pattern.pattern}/ is slow:\n" + "\n".join(slow[:10])


@pytest.mark.parametrize(
    "text",
    [
        "a" + "_" * 44 + "!",  # short, and already slow for a backtracking expression
        ("a" + "_" * N)[: N - 1] + "!",
        ("a._-" * N)[: N - 1] + "!",
        "a" * (N - 1) + "!",
        "a/" * (N // 2),
        ("nvcr.io/" + "a" * N)[: N - 1] + ":",
        ("a" + "-" * N)[: N - 1] + "!",
    ],
)
def test_image_reference_check_is_fast(text):
    from workspaces.forms import JobForm, is_image_reference

    t0 = time.perf_counter()
    assert not is_image_reference(text)
    assert time.perf_counter() - t0 < LIMIT_S
    assert "IMAGE_RE" not in vars(JobForm)  # the backtracking expression is gone


@pytest.mark.parametrize(
    "image",
    [
        "busybox",
        "busybox:1.36",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "registry.example/alice-secret-image",
        "localhost:5000/team/tool:v2",
        "ghcr.io/org/my_image__x:v1.2-rc",
        "[::1]:5000/x",
        "busybox@sha256:" + "a" * 64,
        "busybox:1.36@sha256:" + "0" * 64,
        "quay.io/a-b--c/d.e_f",
    ],
)
def test_image_references_accepted(image):
    from workspaces.forms import is_image_reference

    assert is_image_reference(image)


@pytest.mark.parametrize(
    "image",
    [
        "",
        "Busy Box",
        "busybox; rm -rf /",
        '<script>alert("x")</script>',
        "a:b:c",
        "a//b",
        "/a",
        "a/",
        "a___b",
        "-x.io/a",
        "x.io-/a",
        "busybox@sha256:abc",
        "busybox:" + "t" * 129,
        "ünïcode",
        "a" + "_" * 44 + "!",
    ],
)
def test_image_references_refused(image):
    from workspaces.forms import is_image_reference

    assert not is_image_reference(image)
