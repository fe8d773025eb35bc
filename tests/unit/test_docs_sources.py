"""The user's documents and examples cite the source papers by reference, not by internal file name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".toml"))]
INTERNAL = re.compile(r"seeds/\d{3}")  # the papers' file names, which users do not have


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_internal_paper_file_names(doc: Path) -> None:
    hits = [f"{doc.name}:{i}: {line.strip()}"
            for i, line in enumerate(doc.read_text().splitlines(), 1) if INTERNAL.search(line)]
    assert not hits, "\n".join(hits)


def test_bench_notes_that_reach_the_results_page_name_the_paper() -> None:
    from polybus.bench._balance import MODEL_NOTE

    assert not INTERNAL.search(MODEL_NOTE)
    assert "Kim" in MODEL_NOTE and "Purtilo" in MODEL_NOTE
