"""The procedure modules and the Celery tasks import each other as a DAG, at module level.

Read from the source (ast), so an import hidden inside a function counts too: the engine
records, the queue enqueues by task name, the reaper has its own module, and nothing under
gpus/procedures/ imports gpus.tasks."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FILES = sorted((REPO / "gpus" / "procedures").glob("*.py")) + [REPO / "gpus" / "tasks.py"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in FILES}


def _targets(node: ast.AST, module: str, is_package: bool):
    """The modules of MODULES an import statement loads (its package included)."""
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
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            prefix = ".".join(parts[:i])
            if prefix in MODULES and prefix != module:
                out.add(prefix)
    return out


def graph():
    """{module: {imported module: module level?}}"""
    edges = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        top = {id(n) for n in tree.body}
        found = edges.setdefault(module, {})
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, module, path.name == "__init__.py"):
                    found[target] = found.get(target, False) or id(node) in top
    return edges


def find_cycle(edges):
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n) :] + [n]
            if n not in state:
                cycle = visit(n)
                if cycle:
                    return cycle
        state[m] = "done"
        stack.pop()
        return None

    for m in sorted(edges):
        if m not in state:
            cycle = visit(m)
            if cycle:
                return cycle
    return None


def test_the_graph_is_read():
    edges = graph()
    assert {"gpus.procedures.engine", "gpus.procedures.service", "gpus.tasks"} <= set(edges)
    assert "gpus.procedures.recording" in edges["gpus.procedures.engine"]
    assert "gpus.procedures.engine" in edges["gpus.tasks"]


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle)


def test_imports_between_these_modules_are_at_module_level():
    hidden = [f"{m} -> {t}" for m, targets in graph().items() for t, top in targets.items() if not top]
    assert hidden == []


def test_nothing_in_procedures_imports_the_tasks_or_the_engine_back():
    edges = graph()
    for module, targets in edges.items():
        if module.startswith("gpus.procedures"):
            assert "gpus.tasks" not in targets, module
    for low in ("recording", "queue", "reaper", "service"):
        assert "gpus.procedures.engine" not in edges[f"gpus.procedures.{low}"], low
