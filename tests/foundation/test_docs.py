"""The architecture pages name modules that exist: a page that names a moved or renamed module
fails here, not in a newcomer's hands."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "docs" / "architecture.md", *sorted((REPO / "docs" / "architecture").glob("*.md"))]
# The other guides a newcomer reads name modules too
GUIDES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# A path in backticks under one of the product's folders: `gpus/view/live.py`, `lab/gpusim.py`
PATH = re.compile(r"`((?:brickadmin|gpus|workspaces|lab|scenarios|bench|bin|deploy|tests|templates|static)/[\w./-]+)")


def missing_paths(text: str) -> list[str]:
    return sorted({p for p in PATH.findall(text) if not (REPO / p.rstrip(".")).exists()})


def test_every_module_an_architecture_page_names_exists():
    assert len(PAGES) >= 6
    assert {page.name: missing_paths(page.read_text()) for page in PAGES} == {page.name: [] for page in PAGES}


def test_every_module_a_guide_names_exists():
    assert {g.name: missing_paths(g.read_text()) for g in GUIDES} == {g.name: [] for g in GUIDES}


def test_a_page_naming_a_moved_module_is_found():
    assert missing_paths("`gpus/ledger.py` and `gpus/numbers/ledger.py`") == ["gpus/ledger.py"]


def test_each_architecture_page_is_linked_from_the_index():
    index = (REPO / "docs" / "architecture.md").read_text()
    assert [p.name for p in PAGES[1:] if f"architecture/{p.name}" not in index] == []
