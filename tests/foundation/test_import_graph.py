"""The product's packages import one another one way: brickadmin <- gpus <- workspaces.

Read from the source (ast) over every module of brickadmin/, gpus/ and workspaces/ but their
migrations, so an import inside a function counts as much as one at the top. Importing
``a.b.c`` runs ``a`` and ``a.b`` first, so it counts as importing those packages too. What
an app adds to another (the Workspaces' checks, procedures, chart rule) is registered from
its ``AppConfig.ready()``, never by an import back."""

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("brickadmin", "gpus", "workspaces")
FILES = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py") if "migrations" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in FILES}


def _targets(node: ast.AST, module: str, is_package: bool) -> set[str]:
    """The modules of MODULES an import statement loads (its packages included)."""
    names = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = package[: len(package) - (node.level - 1)]
            base = ".".join(base + ([node.module] if node.module else []))
        else:
            base = node.module
        names = [base] + [f"{base}.{a.name}" for a in node.names]
    out = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in MODULES and prefix != module:
                out.add(prefix)
    return out


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per test process (parsing is most of these tests' time)."""
    return ast.parse(path.read_text(), filename=str(path))


def graph() -> dict[str, set[str]]:
    """{module: the product modules it imports, anywhere in its source}"""
    return {module: set(targets) for module, targets in _graph().items()}


@functools.cache
def _graph() -> dict[str, set[str]]:
    edges = {}
    for module, path in MODULES.items():
        tree = parsed(path)
        found = edges.setdefault(module, set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= _targets(node, module, path.name == "__init__.py")
    return edges


def tangles(edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): every module of
    one imports, directly or not, every other. None when the imports run one way."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _app(module: str) -> str:
    return module.split(".")[0]


def _between(edges, source: str, target: str) -> list[str]:
    return sorted(
        f"{m} -> {t}" for m, targets in edges.items() for t in targets if _app(m) == source and _app(t) == target
    )


def test_the_graph_is_read_with_the_imports_inside_functions():
    edges = graph()
    assert {"brickadmin.cluster.gateway", "gpus.view.stored", "workspaces.health"} <= set(edges)
    assert not any("migrations" in m for m in edges)
    assert "gpus.numbers.ledger" in edges["workspaces.approvals"]  # at the top
    assert "gpus.view.live" in edges["workspaces.approvals"]  # at the top
    assert "gpus.procedures.registry" in edges["gpus.procedures.findings"]  # at the top
    assert "gpus.view.stored" in edges["gpus.view.reading"]
    assert "brickadmin.cluster" in edges["brickadmin.cluster.kube"]  # its package runs first


def test_no_import_cycle_in_the_product():
    assert tangles(graph()) == []


def test_a_cycle_is_found():
    assert tangles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_view_never_imports_the_procedures():
    """The stopped runs' findings are handed to the view from GpusConfig.ready()."""
    edges = graph()
    view = [m for m in edges if m.split(".")[:2] == ["gpus", "view"]]
    assert "gpus.view.stored" in view
    found = [f"{m} -> {t}" for m in view for t in edges[m] if t.startswith("gpus.procedures")]
    assert found == []


VIEW_ROWS = {"ViewNode", "ViewState", "ViewWorkspace", "ViewJob", "ViewProblem", "ViewResourceRow", "ViewTypeRow"}


def test_only_the_view_reads_its_rows():
    """Pages and the Workspaces read the view through gpus.view.reading, never its rows."""
    found = []
    for module, path in MODULES.items():
        if module.startswith("gpus.view") or module in ("gpus.models", "gpus.admin"):
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "gpus.models":
                found += [f"{module}:{node.lineno} {a.name}" for a in node.names if a.name in VIEW_ROWS]
    assert found == []


def test_no_private_name_is_imported_from_another_app():
    """A name shared between apps is public."""
    found = set()
    for module, path in MODULES.items():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if _app(node.module) != _app(module):
                    found |= {f"{module}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")}
    # being renamed with the split of the procedure definitions
    assert found <= {
        "workspaces.procedures: gpus.procedures.definitions._Fix",
        "workspaces.procedures: gpus.procedures.definitions._name_field",
    }


def test_gpus_never_imports_workspaces():
    assert _between(graph(), "gpus", "workspaces") == []


def test_brickadmin_imports_neither_app():
    edges = graph()
    assert _between(edges, "brickadmin", "gpus") + _between(edges, "brickadmin", "workspaces") == []


def test_the_cluster_package_imports_only_its_contract():
    """Its modules import one another, and each such import runs the package first."""
    assert graph()["brickadmin.cluster"] <= {"brickadmin", "brickadmin.cluster.base"}


def test_no_module_imports_at_its_bottom():
    """Imports sit above the first definition: a registry is filled from ready(), not by a
    module importing another at its end."""
    late = []
    for module, path in MODULES.items():
        seen_definition = False
        for node in parsed(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                seen_definition = True
            elif seen_definition and isinstance(node, (ast.Import, ast.ImportFrom)):
                late.append(f"{module}:{node.lineno}")
    assert late == []
