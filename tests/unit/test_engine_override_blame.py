"""A mistake an engine finds once the configuration is loaded is said where the value
was written, as one found loading is (docs/configuration.md): ``--set`` (``overrides``
from Python) when an override chose the engine, else the file. `polybus run --set
cluster.engine=mpi` blamed app.toml, which does not name the mpi engine.

Refused before any process starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import polybus
from polybus.cli.main import main
from polybus.config import load
from polybus.engines import launchenv
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for v in launchenv.RANK_VARS:  # (not under a launcher)
        monkeypatch.delenv(v, raising=False)
    return str(write_one_call_app(tmp_path))


def test_run_blames_set_for_the_mpi_engine_without_mpiexec(
        app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", app, "--set", "cluster.engine=mpi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polybus run: error: --set: cluster.engine: the mpi engine "
                          "runs one rank for the client and one per replica"), err


@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_run_blames_set_for_an_engine_that_refuses_the_registry_given(
        app: str, engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", app, "--set", f"cluster.engine={engine}",
                 "--registry", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == (
        f"polybus run: error: --set: cluster.engine: the {engine} engine starts its own "
        "registry; it uses no other (run without a registry (--registry; registry= from "
        "Python), or use the hosts engine)\n")
    with pytest.raises(ConfigError) as info:
        polybus.run(app, {"cluster.engine": engine}, registry="127.0.0.1:1")
    assert (info.value.file, info.value.key) == ("overrides", "cluster.engine")


def test_an_engine_the_file_chose_is_still_the_file_s(app: str) -> None:
    Path(app).write_text(Path(app).read_text() + '\n[cluster]\nengine = "ray"\n')
    with pytest.raises(ConfigError) as info:  # (another override changes nothing)
        polybus.run(app, {"modules.server.replication": 2}, registry="127.0.0.1:1")
    assert (info.value.file, info.value.key) == (str(Path(app).resolve()), "cluster.engine")


def test_check_blames_set_for_an_engine_whose_package_is_missing(
        app: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # (not installed, as find_spec sees it)
    assert main(["check", app, "--no-import", "--set", "cluster.engine=ray"]) == 2
    assert "error: --set: cluster.engine: the ray engine needs ray, which is not " \
           "installed" in capsys.readouterr().err


def test_a_configuration_knows_which_keys_the_overrides_wrote(app: str) -> None:
    here = str(Path(app).resolve())
    for sets in (["cluster.engine=mpi"], ['cluster={engine="mpi"}']):  # (or a table above)
        config = load(app, sets)
        assert config.origin("cluster.engine") == "--set"
        assert config.origin("modules.server.replication") == here
    assert load(app).origin("cluster.engine") == here
    # (where a value came from is not the configuration: the same values compare equal)
    assert load(app, ["cluster.engine=local"]) == load(app)


@pytest.mark.parametrize(("engine", "package"), [("ray", "ray"), ("mpi", "mpi4py")])
def test_run_blames_set_for_an_engine_whose_package_does_not_import(
        app: str, engine: str, package: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # `run --set cluster.engine=ray` said "error: cluster.engine: the ray engine needs
    # ray, which does not import", neither --set nor the file, where check said --set.
    monkeypatch.setitem(sys.modules, package, None)  # (an import of it fails)
    monkeypatch.setitem(sys.modules, f"{package}.MPI", None)
    if engine == "mpi":  # (as under mpiexec with one rank a replica: past the rank count)
        monkeypatch.setattr("polybus.engines.mpi._check_size", lambda *a, **k: None)
        monkeypatch.setattr("polybus.engines.mpi.launched_rank", lambda: 0)
    assert main(["run", app, "--set", f"cluster.engine={engine}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polybus run: error: --set: cluster.engine: the {engine} engine "
                          f"needs {package}, which does not import"), err
