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


USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MD_NAME = re.compile(r"[\w./-]*\w\.md\b")


def _named_documents_missing(doc: Path, text: str) -> list[str]:
    return sorted(name for name in set(MD_NAME.findall(text))
                  if not any(p.exists() for p in (doc.parent / name, ROOT / name,
                                                   ROOT / "docs" / name)))


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_document_a_document_names_exists(doc: Path) -> None:
    # docs/results.md named BENCHMARKS.md, which the repository never had.
    assert not _named_documents_missing(doc, doc.read_text())


def test_the_results_page_names_only_what_exists() -> None:
    from polybus.bench.results import render_page

    page = ROOT / "docs" / "results.md"
    text = render_page([], page)
    assert not _named_documents_missing(page, text)
    from polybus.bench import registry

    assert "src/polybus/bench/b_NAME.py" in text
    for path in re.findall(r"src/polybus/[\w/]+\.py", text):
        names = registry.names() if "NAME" in path else [""]
        for name in names:
            assert (ROOT / path.replace("NAME", name)).exists(), path
