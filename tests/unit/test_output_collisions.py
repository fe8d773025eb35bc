"""An output file that is an input, or another output's file, is refused before anything
runs: `polybus sweep app.toml --csv app.toml` replaced the configuration it swept, and
`--json F --csv F` kept only the CSV, both silently."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli import cmd_sweep
from polybus.cli.main import main
from polybus.testing.apps import ONE_CALL_SERVER, write_one_call_app

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


def _run(app: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, int]:
    """`polybus run` with its run replaced by one that fails as a wrong configuration
    does (whose error --json would write): the exit status, and how many runs began."""
    from polybus.cli import cmd_run
    from polybus.errors import ConfigError

    runs: list[object] = []

    def fail(*a: object, **k: object) -> None:
        runs.append(a)
        raise ConfigError("wrong", file=str(app))
    monkeypatch.setattr(cmd_run, "run", fail)
    return main(["run", str(app), *argv]), len(runs)


def test_run_refuses_to_write_its_json_over_the_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # (it ran, then replaced app.toml with the result, exit status 0)
    app = write_one_call_app(tmp_path)
    before = app.read_text()
    monkeypatch.chdir(tmp_path)
    assert _run(app, monkeypatch, "--json", "app.toml") == (2, 0)
    assert app.read_text() == before
    assert capsys.readouterr().err == (
        "polybus run: error: --json app.toml: is the configuration being run, which it "
        "would replace; name another file\n")


def test_run_refuses_to_write_its_json_over_a_module_s_source_even_of_a_wrong_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The sources are those the configuration names, in the file or once the overrides
    are applied, valid or not: a run that fails on a mistake writes its error to --json."""
    app = write_one_call_app(tmp_path)
    (tmp_path / "other.py").write_text(ONE_CALL_SERVER)
    other = ["--set", 'modules.server.source="other.py"']
    for argv, name in (([], "server.py"), (["--set", "modules.server.replication=-1"],
                                           "server.py"),
                       (other, "other.py"), (other, "server.py")):  # (the file's still)
        target = tmp_path / name
        assert _run(app, monkeypatch, *argv, "--json", str(target)) == (2, 0)
        assert target.read_text() == ONE_CALL_SERVER
        assert (f"--json {target}: is module server's source, which it would replace"
                in capsys.readouterr().err)


def test_run_refuses_to_write_its_json_over_a_mil_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    write_one_call_app(tmp_path)
    cfg = tmp_path / "app.cfg"
    cfg.write_text('module client { source = "client.py" :: entrypoint = "main" ::\n'
                   '  use interface f :: }\n'
                   'module server { source = "server.py" :: define interface f :: }\n'
                   'module app { instance client :: instance server ::\n'
                   '  bind client f server f :: }\n')
    before = cfg.read_text()
    for target, what in ((cfg, "the configuration being run"),
                         (tmp_path / "client.py", "module client's source")):
        assert _run(cfg, monkeypatch, "--json", str(target)) == (2, 0)
        assert f"--json {target}: is {what}, which it would replace" in \
            capsys.readouterr().err
    assert cfg.read_text() == before


def test_run_writes_its_json_to_another_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    app = write_one_call_app(tmp_path)
    out = tmp_path / "out.json"
    assert _run(app, monkeypatch, "--json", str(out)) == (2, 1)  # (a ConfigError: 2)
    assert json.loads(out.read_text())["error"]["type"] == "ConfigError"
