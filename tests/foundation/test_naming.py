"""Tests read like the code: a test file does not repeat the folder it is in
(tests/lab/test_cli.py, not tests/lab/test_lab_cli.py)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_file_starts_with_its_folder():
    repeated = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("test_*.py")
        if p.stem.removeprefix("test_").startswith(p.parent.name + "_")
    ]
    assert repeated == []
