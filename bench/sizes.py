"""The biggest files and functions of the product code (not a test): line counts for
comparing two commits, e.g. before and after a restructuring.

    .venv/bin/python bench/sizes.py [git-ref]      # default: the working tree
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
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", ref, *ROOTS],
                           capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        if name.endswith(".py") and "/migrations/" not in name:
            yield name, subprocess.run(["git", "-C", str(REPO), "show", f"{ref}:{name}"], capture_output=True,
                                       text=True, check=True).stdout


def main():
    ref = sys.argv[1] if len(sys.argv) > 1 else None
    files, funcs = [], []
    for name, text in sources(ref):
        files.append((len(text.splitlines()), name))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.append((node.end_lineno - node.lineno + 1, f"{name}:{node.name}"))
    print(f"product code at {ref or 'working tree'}: {sum(n for n, _ in files)} lines in {len(files)} files")
    print("biggest files:")
    for n, name in sorted(files, reverse=True)[:10]:
        print(f"  {n:5d}  {name}")
    print("biggest functions:")
    for n, name in sorted(funcs, reverse=True)[:10]:
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
