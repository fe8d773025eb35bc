"""Every relative link between the user's documents resolves: the file exists, and a
``#anchor`` is a GitHub-style anchor of one of the target's headings (configuration.md's
cells link to strategies.md's sections by key, e.g. ``strategies.md#cache_bytes``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``, a repeated one numbered ``-1``, ``-2``..."""
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        fenced ^= line.startswith("```")
        if fenced or not re.match(r"#{1,6} ", line):
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip())
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return {slug if n == 0 else f"{slug}-{n}" for slug, count in seen.items()
            for n in range(count + 1)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "``", text)  # a code span is not a link
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_anchors_are_githubs() -> None:
    assert {"cache_bytes", "bells-held-back-coalesce", "3-messages",
            "one-value-every-replica-needs-polybusbroadcast"} <= (
        _anchors(ROOT / "docs" / "strategies.md") | _anchors(ROOT / "docs" / "design.md")
        | _anchors(ROOT / "docs" / "protocol.md") | _anchors(ROOT / "docs" / "tuning.md"))


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in _links(doc):
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, "\n".join(broken)
