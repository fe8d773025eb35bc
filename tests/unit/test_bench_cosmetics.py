"""Small things a new user met in `polybus bench`: NAME with --page-only was silently
ignored; an option bench does not have printed the top-level usage; a page of --quick
runs alone was titled as the figures of record; a skipped peer kept its parameters."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from polybus.bench import peer_rows
from polybus.bench.peers import PeerUnavailable, dask_peer, mpi, ray_peer, zmq_peer
from polybus.bench.report import BenchResult, Row
from polybus.bench.results import QUICK_TITLE, TITLE
from polybus.bench.stats import Stat
from polybus.cli.main import main

ONE = Stat(1.0, 1.0, 1.0, 3)


def _write(out: Path, name: str, quick: bool) -> None:
    res = BenchResult(name, {"quick": True} if quick else {}, x_label="x")
    res.add(Row.of("polybus", {}, 1, "seconds", ONE))
    res.write_json(out / f"{name}.json")


def test_page_only_with_a_name_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "latency", True)
    assert main(["bench", "latency", "--page-only", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "results.md").exists()
    assert capsys.readouterr().err == (
        "polybus bench: error: --page-only runs nothing and makes the page from every "
        "benchmark's JSON in --out; leave out 'latency'\n")


def test_an_option_bench_does_not_have_prints_bench_s_usage(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "latency", "--quick", "--reps", "3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: polybus bench "), err
    assert err.endswith("polybus bench: error: unrecognized arguments: --reps 3\n")


def test_a_page_of_quick_runs_alone_is_titled_as_quick(tmp_path: Path) -> None:
    _write(tmp_path, "latency", True)
    _write(tmp_path, "sort", True)
    assert main(["bench", "--page-only", "--out", str(tmp_path)]) == 0
    page = tmp_path / "results.md"
    assert page.read_text().splitlines()[0] == QUICK_TITLE
    # and says the commands that made it with --quick (it said `polybus bench all --out`)
    said = page.read_text().splitlines()[2]
    assert f"`polybus bench all --quick --out {tmp_path}/`" in said, said
    assert f"`polybus bench NAME --quick --out {tmp_path}/`" in said, said
    _write(tmp_path, "sort", False)  # (a full run among them: the page of record)
    assert main(["bench", "--page-only", "--out", str(tmp_path)]) == 0  # (its own page)
    assert page.read_text().splitlines()[0] == TITLE
    assert f"`polybus bench all --out {tmp_path}/`" in page.read_text().splitlines()[2]


def test_a_skipped_peer_keeps_no_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(*a: object, **k: object) -> None:
        raise PeerUnavailable("not in this test")

    monkeypatch.setattr(mpi, "rtt_us", unavailable)
    monkeypatch.setattr(mpi, "describe", unavailable)
    monkeypatch.setattr(zmq_peer, "ZmqPeer", unavailable)
    monkeypatch.setattr(ray_peer, "measure", unavailable)
    monkeypatch.setattr(dask_peer, "measure", unavailable)
    result = BenchResult("latency", {})
    plan = SimpleNamespace(sizes=[0], reps=3, placements=["split"])

    class Quiet:
        def begin(self, total: int, description: str) -> None:
            pass

        def advance(self, description: str) -> None:
            pass

    peer_rows.latency(result, plan, lambda size: 10, False, Quiet())  # type: ignore[arg-type]
    peer_rows.bandwidth(result, plan, False, Quiet())  # type: ignore[arg-type]
    assert {"ray", "dask"} <= set(result.skipped)
    doc = json.loads(result.to_json())
    assert "ray" not in doc["params"].get("peers", {}), doc["params"]
    assert "dask" not in doc["params"].get("peers", {}), doc["params"]
