"""bench sort measures every cell alike: the one_process baseline, the polybus runs and the
parts a modelled run sleeps for each get the warm-up and the repetitions (no processes
here: the runs and the sorts are counted, not timed)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from polybus.bench import b_sort
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat


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


def test_each_algorithm_has_its_speedup_ratios_at_its_largest_baseline_size() -> None:
    # A full run adds the target, insertion sort of 2^16 on 2 workers, polybus and
    # mpi4py alone (no one_process there): the ratios were looked for at 2^16 only, found
    # no baseline, and insertion sort had none in the run of record.
    result = BenchResult("sort")
    stat = Stat(1.0, 0.9, 1.1, 3)
    for algo, n in (("insertion", 2**14), ("quicksort", 2**20)):
        result.add(Row.of("one_process", {"algorithm": algo}, n, "seconds", stat))
        for workers, model in ((2, "real"), (4, "sleep")):
            cfg = {"algorithm": algo, "workers": workers, "model": model}
            result.add(Row.of("polybus", cfg, n, "seconds", stat))
    target = {"algorithm": "insertion", "workers": 2}
    result.add(Row.of("mpi4py", {**target, "ranks": 2}, 2**16, "seconds", stat))
    result.add(Row.of("polybus", {**target, "model": "real"}, 2**16, "seconds", stat))
    b_sort._ratios(result)
    assert [r.name for r in result.ratios] == [
        "one_process/polybus insertion n=16384 workers=2 (real)",
        "one_process/polybus insertion n=16384 workers=4 (sleep)",
        "one_process/polybus quicksort n=1048576 workers=2 (real)",
        "one_process/polybus quicksort n=1048576 workers=4 (sleep)"]
