"""The biggest files and functions of the product code (not a test): line counts for
comparing two commits, e.g. before and after a restructuring.

    .venv/bin/python bench/sizes.py [git-ref]      # default: the working tree
    .venv/bin/python bench/sizes.py BEFORE AFTER   # both, and what became of BEFORE's biggest

A function is named by file and qualified name (Class.method); one that moved to another
file is found by its qualified name when that name is unique.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOTS = ("brickadmin", "gpus", "workspaces")
REPO = Path(__file__).resolve().parents[1]


def sources(ref):
    if ref is None:
        for root in ROOTS:
            for p in sorted((REPO / root).rglob("*.py")):
                if "migrations" not in p.parts:
                    yield str(p.relative_to(REPO)), p.read_text()
        return
    names = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", ref, *ROOTS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        if name.endswith(".py") and "/migrations/" not in name:
            yield (
                name,
                subprocess.run(
                    ["git", "-C", str(REPO), "show", f"{ref}:{name}"], capture_output=True, text=True, check=True
                ).stdout,
            )


def _functions(tree, prefix=""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def measure(ref):
    """({file: lines}, {"file:qualname": lines})"""
    files, funcs = {}, {}
    for name, text in sources(ref):
        files[name] = len(text.splitlines())
        for qual, n in _functions(ast.parse(text)):
            funcs[f"{name}:{qual}"] = n
    return files, funcs


def report(ref, files, funcs):
    print(f"product code at {ref or 'working tree'}: {sum(files.values())} lines in {len(files)} files")
    print("biggest files:")
    for name, n in sorted(files.items(), key=lambda x: -x[1])[:10]:
        print(f"  {n:5d}  {name}")
    print("biggest functions:")
    for name, n in sorted(funcs.items(), key=lambda x: -x[1])[:10]:
        print(f"  {n:5d}  {name}")


def after_of(name, funcs):
    """The same function after: same file and name, else the one function of that qualified name."""
    if name in funcs:
        return funcs[name], name
    qual = name.split(":", 1)[1]
    found = [k for k in funcs if k.split(":", 1)[1] == qual]
    return (funcs[found[0]], found[0]) if len(found) == 1 else (None, "gone or split")


def main():
    refs = sys.argv[1:3] or [None]
    measured = [measure(ref) for ref in refs]
    for ref, (files, funcs) in zip(refs, measured, strict=True):
        report(ref, files, funcs)
        print()
    if len(refs) == 2:
        (files_a, funcs_a), (files_b, funcs_b) = measured
        print(f"{refs[0]}'s biggest, before -> after ({refs[1]}):")
        for name, n in sorted(files_a.items(), key=lambda x: -x[1])[:10]:
            print(f"  {n:5d} -> {files_b[name] if name in files_b else 'gone':>5}  {name}")
        for name, n in sorted(funcs_a.items(), key=lambda x: -x[1])[:10]:
            m, where = after_of(name, funcs_b)
            print(
                f"  {n:5d} -> {m if m is not None else '-':>5}  {name}" + (f"  (now {where})" if where != name else "")
            )


if __name__ == "__main__":
    main()
