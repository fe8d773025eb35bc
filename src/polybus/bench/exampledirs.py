"""Where a benchmark finds the example program it runs (``examples/sort``, ``examples/dna``).

From a checkout, or an editable install, they are the source tree's ``examples/``. A
wheel (``pip install /path/to/polybus``, as the README installs it for a program of
one's own) has no source tree beside it, so it carries a copy of each under
``polybus/bench/examples/`` (pyproject.toml's ``force-include``): without them
``polybus bench sort`` measured nothing of polybus ("skipped polybus: examples/sort not
found", exit status 0), and ``bench dna`` left out its pipeline.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PACKAGED", "SHIPPED", "TREE", "example"]

#: the examples a benchmark runs, each shipped in the wheel
SHIPPED = ("sort", "dna")
TREE = Path(__file__).resolve().parents[3] / "examples"
PACKAGED = Path(__file__).resolve().parent / "examples"


def example(name: str) -> Path:
    """The folder of example ``name``: the source tree's, else the wheel's copy."""
    tree = TREE / name
    return tree if tree.is_dir() else PACKAGED / name
