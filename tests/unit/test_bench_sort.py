"""bench sort measures every cell alike: the one_process baseline, the polybus runs and the
parts a modelled run sleeps for each get the warm-up and the repetitions (no processes
here: the runs and the sorts are counted, not timed)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from polybus.bench import b_sort


class Log:
    """What ran, in order: ("run", n) for a polybus run, ("sort", n) for a sort timed
    here, ("cell", description) when the benchmark reports a cell done."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def begin(self, total: int, description: str) -> None:
        pass

    def advance(self, description: str) -> None:
        self.events.append(("cell", description))

    def per_cell(self) -> dict[str, Counter[str]]:
        """Each cell's description -> what ran for it (since the cell before)."""
        out: dict[str, Counter[str]] = {}
        ran: Counter[str] = Counter()
        for kind, what in self.events:
            if kind == "cell":
                out[what], ran = ran, Counter()
            else:
                ran[kind] += 1
        return out


@pytest.mark.parametrize("quick", [True, False])
def test_the_baseline_gets_the_warmup_and_repetitions_of_every_other_cell(
        quick: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # --quick timed the one_process baseline (and every cell) once, cold: a false 1.5x
    log = Log()

    def polybus(toml: Path, sets: list[str]) -> float:
        log.events.append(("run", sets))
        return 1.0

    def sort(xs: Any) -> Any:
        log.events.append(("sort", len(xs)))
        return xs

    monkeypatch.setattr(b_sort, "_polybus", polybus)
    monkeypatch.setattr(b_sort, "_sorters", lambda: dict.fromkeys(b_sort.ALGORITHMS, sort))
    monkeypatch.setattr(b_sort, "why_unavailable", lambda peer: "not in this test")
    monkeypatch.setattr(b_sort.optional_peers, "sort", lambda *a, **k: None)
    result = b_sort.run(quick, log)

    reps = {r.n for r in result.rows}
    assert len(reps) == 1 and reps.pop() >= 3  # the baseline's rows and the others', alike
    each = result.params["reps"] + result.params.get("warmup", 0)
    cells = log.per_cell()
    p = b_sort.plan(quick)
    assert len(cells) == sum(map(len, p.sizes.values())) * (1 + len(p.real) + len(p.modelled))
    for what, ran in cells.items():
        if "one_process" in what:  # the baseline: the whole array sorted here
            assert ran == Counter({"sort": each}), what
            continue
        workers = int(what.rsplit(" x", 1)[1])
        if workers in p.real:
            assert ran == Counter({"run": each}), what
        else:  # modelled: each worker's part timed here, then the polybus runs
            assert ran == Counter({"sort": each * workers, "run": each}), what
    assert result.params["warmup"] >= 1
