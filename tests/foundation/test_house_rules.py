"""The written rules of the house (docs/contributing.md) held by tests, each with a test that
the rule's finder finds a deliberately broken example.

Read from the source (ast), as the import graph is: an import inside a function counts."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.foundation.test_import_graph import MODULES, REPO, graph, module_name, parsed

# The floors of gpus, top to bottom: a module imports its own floor or the floors below it.
GPUS_FLOORS = ("gpus.views", "gpus.procedures", "gpus.view", "gpus.numbers")
# What the numbers may import of the product: themselves and the cluster's pure vocabulary.
NUMBERS_MAY_IMPORT = ("gpus.numbers", "brickadmin.cluster", "brickadmin", "gpus")
# The stored view's rows: read through gpus.view only (its reading module is the one door).
VIEW_ROWS = {"ViewNode", "ViewState", "ViewWorkspace", "ViewJob", "ViewProblem", "ViewResourceRow", "ViewTypeRow"}
VIEW_ROWS_MAY_BE_NAMED_IN = ("gpus.view", "gpus.models", "gpus.admin")


def _floor(module: str) -> int | None:
    for i, floor in enumerate(GPUS_FLOORS):
        if module == floor or module.startswith(floor + "."):
            return i
    return None


def imports_up_the_floors(edges: dict[str, set[str]]) -> list[str]:
    """The imports from a floor of gpus to a floor above it."""
    found = []
    for module, targets in edges.items():
        below = _floor(module)
        for target in targets:
            above = _floor(target)
            if below is not None and above is not None and above < below:
                found.append(f"{module} -> {target}")
    return sorted(found)


def test_gpus_floors_import_only_downwards():
    assert imports_up_the_floors(graph()) == []


def test_an_import_up_the_floors_is_found():
    edges = {"gpus.numbers.ledger": {"gpus.view.reading"}, "gpus.views.health": {"gpus.numbers.health"}}
    assert imports_up_the_floors(edges) == ["gpus.numbers.ledger -> gpus.view.reading"]


def _imported_roots(tree: ast.AST) -> set[str]:
    """The top-level names of every module a syntax tree imports (absolute imports)."""
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def impure_numbers(modules: dict[str, ast.AST], edges: dict[str, set[str]]) -> list[str]:
    """The numbers' imports of Django or of the product outside the numbers and the cluster."""
    found = []
    for module, tree in modules.items():
        if not module.startswith("gpus.numbers"):
            continue
        if "django" in _imported_roots(tree):
            found.append(f"{module} -> django")
        found += [f"{module} -> {t}" for t in sorted(edges.get(module, ())) if not _may_number_import(t)]
    return sorted(found)


def _may_number_import(target: str) -> bool:
    return any(target == allowed or target.startswith(allowed + ".") for allowed in NUMBERS_MAY_IMPORT[:2]) or (
        target in NUMBERS_MAY_IMPORT
    )


def test_the_numbers_import_no_django_and_nothing_above_them():
    trees = {m: parsed(p) for m, p in MODULES.items()}
    assert impure_numbers(trees, graph()) == []


def test_an_impure_number_is_found():
    trees = {
        "gpus.numbers.health": ast.parse("def f():\n    from django.urls import reverse\n"),
        "gpus.numbers.occupancy": ast.parse("from brickadmin import metrics\n"),
    }
    edges = {"gpus.numbers.occupancy": {"brickadmin", "brickadmin.metrics"}}
    assert impure_numbers(trees, edges) == [
        "gpus.numbers.health -> django",
        "gpus.numbers.occupancy -> brickadmin.metrics",
    ]


def private_names_across_apps(modules: dict[str, ast.AST]) -> list[str]:
    """``from <another app> import _name``: a private name used outside its app."""
    found = []
    for module, tree in modules.items():
        app = module.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                other = node.module.split(".")[0]
                if other != app and other in {"brickadmin", "gpus", "workspaces"}:
                    found += [f"{module}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return sorted(found)


def test_no_private_name_is_used_across_apps():
    assert private_names_across_apps({m: parsed(p) for m, p in MODULES.items()}) == []


def test_a_private_name_across_apps_is_found():
    trees = {"workspaces.procedures": ast.parse("from gpus.procedures.definitions import Step, _Fix\n")}
    assert private_names_across_apps(trees) == ["workspaces.procedures: gpus.procedures.definitions._Fix"]


def view_rows_read_elsewhere(modules: dict[str, ast.AST]) -> list[str]:
    """The modules outside the view that name its rows (and so query them)."""
    found = []
    for module, tree in modules.items():
        if any(module == m or module.startswith(m + ".") for m in VIEW_ROWS_MAY_BE_NAMED_IN):
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        found += [f"{module}: {row}" for row in sorted(names & VIEW_ROWS)]
    return sorted(found)


def test_pages_and_workspaces_read_the_view_through_its_one_door():
    assert view_rows_read_elsewhere({m: parsed(p) for m, p in MODULES.items()}) == []


def test_a_view_row_read_elsewhere_is_found():
    trees = {
        "workspaces.waits": ast.parse("from gpus.models import ViewNode\nViewNode.objects.all()\n"),
        "gpus.view.reading": ast.parse("from gpus.models import ViewNode\n"),
    }
    assert view_rows_read_elsewhere(trees) == ["workspaces.waits: ViewNode"]


SETTINGS = REPO / "brickadmin" / "settings.py"


def _declared_settings() -> set[str]:
    tree = ast.parse(SETTINGS.read_text())
    return {
        t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
    }


def undeclared_knobs(modules: dict[str, ast.AST], declared: set[str]) -> list[str]:
    """``getattr(settings, "BRICK_…", default)`` (a knob with a default of its own, away from
    settings.py) and ``settings.BRICK_…`` that settings.py does not declare."""
    found = []
    for module, tree in modules.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in {"settings", "dj_settings"}
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("BRICK_")
            ):
                found.append(f"{module}: getattr(settings, {node.args[1].value!r})")
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in {"settings", "dj_settings"}
                and node.attr.startswith("BRICK_")
                and node.attr not in declared
            ):
                found.append(f"{module}: settings.{node.attr} is not declared")
    return sorted(set(found))


def test_every_knob_is_declared_in_settings():
    modules = {m: parsed(p) for m, p in MODULES.items() if m != "brickadmin.settings"}
    assert undeclared_knobs(modules, _declared_settings()) == []


def test_an_undeclared_knob_is_found():
    trees = {"gpus.view.stored": ast.parse('x = getattr(settings, "BRICK_X", 30)\ny = settings.BRICK_Y\n')}
    assert undeclared_knobs(trees, {"BRICK_Z"}) == [
        "gpus.view.stored: getattr(settings, 'BRICK_X')",
        "gpus.view.stored: settings.BRICK_Y is not declared",
    ]


def rules_without_their_test(contributing: str) -> list[str]:
    """The rules of docs/contributing.md that name no test file of the repository."""
    section = contributing.split("## Rules the tests hold you to", 1)[1].split("\n## ", 1)[0]
    rules = [r.strip() for r in re.split(r"\n(?=- )", section.strip()) if r.strip().startswith("- ")]
    missing = []
    for rule in rules:
        named = re.findall(r"`(tests/[\w/.]+\.py)", rule)
        if not named or not all((REPO / path).exists() for path in named):
            missing.append(rule.splitlines()[0][:80])
    return missing


def test_each_written_rule_names_the_test_that_holds_it():
    assert rules_without_their_test((REPO / "docs" / "contributing.md").read_text()) == []


def test_a_rule_without_its_test_is_found():
    text = "## Rules the tests hold you to\n\n- Held (`tests/foundation/test_house_rules.py`).\n- Not held.\n## Next\n"
    assert rules_without_their_test(text) == ["- Not held."]


def test_the_floors_are_folders():
    """Each floor of gpus is a package, so its import graph reads as folders."""
    for floor in GPUS_FLOORS:
        assert (REPO / Path(*floor.split(".")) / "__init__.py").exists(), floor
    assert module_name(REPO / "gpus" / "numbers" / "__init__.py") == "gpus.numbers"


def _po_entries(text: str) -> list[dict[str, str]]:
    """The entries of a .po file: {"msgid": ..., "msgstr": ..., "flags": ...}, strings joined."""
    entries = []
    for block in text.split("\n\n"):
        entry: dict[str, str] = {"flags": ""}
        key = ""
        for line in block.splitlines():
            if line.startswith("#,"):
                entry["flags"] += line
            elif line.startswith("#"):
                continue
            elif line.startswith('"'):
                entry[key] += ast.literal_eval(line)
            else:
                key, _sep, rest = line.partition(" ")
                entry[key] = ast.literal_eval(rest)
        if entry.get("msgid"):
            entries.append(entry)
    return entries


def untranslated(po_text: str) -> list[str]:
    """The messages of a catalogue with no Korean, or whose Korean is marked fuzzy (not used)."""
    return [
        e["msgid"][:60]
        for e in _po_entries(po_text)
        if "fuzzy" in e["flags"] or not (e.get("msgstr") or e.get("msgstr[0]"))
    ]


def test_every_message_has_its_korean():
    po = (REPO / "locale" / "ko" / "LC_MESSAGES" / "django.po").read_text()
    assert len(_po_entries(po)) > 1000
    assert untranslated(po) == []


def test_a_message_without_korean_is_found():
    po = 'msgid ""\nmsgstr "Content-Type: text/plain"\n\nmsgid "Free"\nmsgstr "여유"\n\n#, fuzzy\nmsgid "Used"\n'
    po += 'msgstr "사용"\n\nmsgid ""\n"Two "\n"lines"\nmsgstr ""\n'
    assert untranslated(po) == ["Used", "Two lines"]


ISSUE_NUMBER = re.compile(r"\bissues? #?\d")


def test_code_and_test_names_speak_of_the_product_not_of_issues():
    said = [
        f"{m}:{i}"
        for m, p in MODULES.items()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if ISSUE_NUMBER.search(line.lower())
    ]
    for path in (REPO / "tests").rglob("test_*.py"):
        functions = [n for n in ast.walk(parsed(path)) if isinstance(n, ast.FunctionDef)]
        said += [f"{path.name}: {n.name}" for n in functions if ISSUE_NUMBER.search(n.name.replace("_", " "))]
    assert said == []


def too_complex(*paths: Path) -> list[str]:
    """The functions over the complexity pyproject.toml allows (Ruff's mccabe), as Ruff names them."""
    ruff = Path(sys.executable).with_name("ruff")
    found = subprocess.run(
        [str(ruff), "check", "--select", "C901", "--output-format", "concise", "--no-cache", *map(str, paths)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    return [line for line in found.stdout.splitlines() if "C901" in line]


def test_no_function_has_more_than_thirty_paths():
    assert too_complex(*(REPO / package for package in ("brickadmin", "gpus", "workspaces"))) == []


def test_a_function_with_too_many_paths_is_found(tmp_path):
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(31))
    (tmp_path / "tangled.py").write_text(f"def tangled(x):\n{branches}    return -1\n")
    assert len(too_complex(tmp_path / "tangled.py")) == 1
