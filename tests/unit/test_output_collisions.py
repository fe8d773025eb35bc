"""An output file that is an input, or another output's file, is refused before anything
runs: `polybus sweep app.toml --csv app.toml` replaced the configuration it swept, and
`--json F --csv F` kept only the CSV, both silently."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli import cmd_sweep
from polybus.cli.main import main
from polybus.testing.apps import write_one_call_app

VARY = ["--vary", "modules.server.replication=1,2", "--repeat", "1"]


def _sweep(app: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, int]:
    runs: list[Sequence[str]] = []
    monkeypatch.setattr(cmd_sweep, "_runner", lambda p, s: runs.append(s) or 1.0)
    return main(["sweep", str(app), *VARY, *argv]), len(runs)


def test_sweep_refuses_to_write_over_the_configuration_it_sweeps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    before = app.read_text()
    monkeypatch.chdir(tmp_path)  # (the same file by another name: app.toml, not a path)
    assert _sweep(app, monkeypatch, "--csv", "app.toml") == (2, 0)
    assert app.read_text() == before
    assert capsys.readouterr().err == (
        "polybus sweep: error: --csv app.toml: is the configuration being swept, which "
        "it would replace; name another file\n")


def test_sweep_refuses_to_write_over_a_module_s_source(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    server = tmp_path / "server.py"
    before = server.read_text()
    assert _sweep(app, monkeypatch, "--json", str(server)) == (2, 0)
    assert server.read_text() == before
    assert (f"--json {server}: is module server's source, which it would replace"
            in capsys.readouterr().err)


def test_sweep_refuses_two_outputs_to_one_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    (tmp_path / "out").mkdir()
    same = tmp_path / "out" / "same.txt"
    assert _sweep(app, monkeypatch, "--json", str(same), "--csv",
                  str(tmp_path / "out" / ".." / "out" / "same.txt")) == (2, 0)
    assert not same.exists()
    assert capsys.readouterr().err == (
        f"polybus sweep: error: --csv {tmp_path}/out/../out/same.txt: the same file as "
        f"--json {same}; give each output a file of its own\n")


def test_sweep_distinct_outputs_are_all_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = write_one_call_app(tmp_path)
    assert _sweep(app, monkeypatch, "--json", str(tmp_path / "s.json"),
                  "--csv", str(tmp_path / "s.csv")) == (0, 2)
    assert (tmp_path / "s.json").read_text().startswith("{")
    assert (tmp_path / "s.csv").read_text().startswith("modules.server.replication,")


@pytest.mark.parametrize(("argv", "said"), [
    (["--json", "{d}/b.out", "--plot", "{d}/b.out"],
     "--plot {d}/b.out: the same file as --json {d}/b.out"),
    (["--json", "{d}/r/latency.json", "--out", "{d}/r"],
     "--out {d}/r/latency.json: the same file as --json {d}/r/latency.json"),
    (["--json", "{d}/r/page.md", "--out", "{d}/r", "--page", "{d}/r/page.md"],
     "--page {d}/r/page.md: the same file as --json {d}/r/page.md"),
])
def test_bench_refuses_two_outputs_to_one_file_before_it_runs(
        argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.bench import registry

    ran: list[str] = []
    monkeypatch.setattr(registry, "run", lambda name, *a, **k: ran.append(name))
    (tmp_path / "r").mkdir()
    if "--plot" in argv:
        pytest.importorskip("matplotlib")
    rc = main(["bench", "latency", "--quick", *(a.format(d=tmp_path) for a in argv)])
    assert (rc, ran) == (2, [])
    assert said.format(d=tmp_path) in capsys.readouterr().err
    assert list((tmp_path / "r").iterdir()) == []
