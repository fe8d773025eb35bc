"""The README's two commands say what the Makefile does, and every document that says
how many processes `make test` runs the suite in gives the Makefile's count.

(docs/design.md said `make test` ran the suite in two processes after the Makefile's
JOBS had gone to three.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def _recipe(target: str) -> list[str]:
    block = MAKEFILE.split(f"\n{target}:", 1)[1].split("\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if not line.startswith("\t"):
            break
        lines.append(line.strip())
    assert lines, target
    return lines


def _variable(name: str) -> str:
    found = re.search(rf"^{name} \?= (\S+)$", MAKEFILE, re.M)
    assert found, name
    return found.group(1)


def _jobs() -> int:
    return int(_variable("JOBS"))


def test_the_readme_says_what_make_demo_does() -> None:
    readme = _flat(ROOT / "README.md")
    (run,) = _recipe("demo")
    assert f"`{run.replace('$(BIN)', '.venv/bin')}`" in readme, run
    venv, _, install = _recipe("$(BIN)/polybus")[:3]
    assert venv == "$(PY) -m venv $(VENV)" and _variable("PY") == "python3", venv
    assert "`python3 -m venv`" in readme
    assert install.endswith("install -q -e .") and "`pip install -e .`" in readme, install


def test_the_readme_gives_make_test_s_pytest_command() -> None:
    readme = _flat(ROOT / "README.md")
    (recipe,) = _recipe("test")
    command = recipe.split(" -m ", 1)[1].replace("$(JOBS)", str(_jobs()))
    assert command.startswith("pytest "), recipe
    assert f"`{command}`" in readme, command
    assert f"{WORDS[_jobs()]} test processes" in readme


def test_every_document_gives_make_test_s_process_count() -> None:
    said = [(doc.name, m.group(1)) for doc in DOCS for m in re.finditer(
        r"`make test` runs the suite in (\w+) (?:test )?processes", _flat(doc))]
    assert said, "no document says how many processes `make test` runs"
    wrong = [(name, n) for name, n in said if n not in (WORDS[_jobs()], str(_jobs()))]
    assert not wrong, (wrong, _jobs())
