"""``cpus`` on a module: its replicas, and on the entrypoint's module the client, run on
those CPUs, every thread of them; the client's CPUs are given back when the run ends,
and a replica never inherits them (config/cpus.py, pinning.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.errors import ConfigError
from polybus.pinning import ENV, can_pin, thread_cpus
from polybus.testing.apps import write_app

pytestmark = pytest.mark.skipif(
    not can_pin() or len(os.sched_getaffinity(0)) < 2,
    reason="pinning needs Linux's CPU affinity and 2 CPUs this process may run on")

MASKS = "import os\n\nfrom polybus.pinning import thread_cpus\n"
SERVER = MASKS + """
def where():
    return os.getpid(), thread_cpus()


def blas():
    return os.environ.get("OMP_NUM_THREADS"), thread_cpus()
"""
CLIENT = MASKS + """
from polybus import use, wait

where = use("where")

def main():
    # calls in flight at once reach both replicas (round robin): one answer of each
    got = dict(wait(p) for p in [where() for _ in range(4)])
    return {"client": thread_cpus(), "replicas": [got[pid] for pid in sorted(got)]}
"""
TOML = """\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.where = { callstyle = "async" }

[bind]
"client.where" = "server.where"
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)


@pytest.fixture
def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _replicas(result: Any) -> list[list[list[int]]]:
    """Each replica's threads' CPU sets (`thread_cpus`), one entry a replica."""
    return list(result["replicas"])


def test_client_and_replicas_run_on_the_cpus_named(app: Path, cpus: list[int]) -> None:
    before = thread_cpus()
    r = polybus.run(app, {"modules.server.cpus": [cpus[1]], "modules.client.cpus": [cpus[0]]})
    assert r.result["client"] == [[cpus[0]]]
    replicas = _replicas(r.result)
    assert len(replicas) == 2
    assert all(m == [[cpus[1]]] for m in replicas), replicas
    # every thread of this process is back where it was, and nothing is left behind
    assert thread_cpus() == before
    assert ENV not in os.environ


def test_one_list_per_replica_is_taken_in_order(app: Path, cpus: list[int]) -> None:
    # (the client's threads as they were: a test process may hold threads of its own,
    # placed by an earlier test, which a run that pins nothing leaves as they are)
    before = thread_cpus()
    r = polybus.run(app, {"modules.server.cpus": [[cpus[0]], [cpus[1]]]})
    got = sorted(m[0] for m in _replicas(r.result))
    assert got == [[cpus[0]], [cpus[1]]]
    assert r.result["client"] == before  # (the client: not pinned)


def test_an_empty_list_pins_nothing(app: Path, cpus: list[int]) -> None:
    before = thread_cpus()
    r = polybus.run(app, {"modules.server.cpus": [], "modules.client.cpus": []})
    assert r.result["client"] == before
    assert all(m == [cpus] for m in _replicas(r.result))


NESTED_CLIENT = MASKS + """
import polybus

def main(inner):
    r = polybus.run(inner)
    return {"client": thread_cpus(), "inner": r.result, "env": os.environ.get("POLYBUS_CPUS_BEFORE")}
"""


def test_a_nested_runs_replicas_do_not_inherit_the_pinned_clients_cpus(
        tmp_path: Path, cpus: list[int]) -> None:
    inner = write_app(tmp_path / "inner", server=SERVER, client=CLIENT, toml=TOML)
    outer = write_app(tmp_path / "outer", server="def unused():\n    return 0\n",
                      client=NESTED_CLIENT, toml=(
                          '[modules.server]\nsource = "server.py"\nreplication = 0\n\n'
                          '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
                          f'args = ["{inner}"]\ncpus = [{cpus[0]}]\n'))
    r = polybus.run(outer)
    assert r.result["client"] == [[cpus[0]]]
    assert r.result["env"] is not None  # (while pinned, the CPUs before are named)
    # the inner run's replicas, started by the pinned client, run where it could before
    assert all(m == [cpus] for m in _replicas(r.result["inner"]))
    assert r.result["inner"]["client"] == [[cpus[0]]]  # (the same process, still pinned)
    assert ENV not in os.environ


@pytest.mark.parametrize("module", ["server", "client"])
def test_a_cpu_this_machine_does_not_give_is_refused_before_anything_starts(
        app: Path, module: str) -> None:
    before = thread_cpus()
    with pytest.raises(ConfigError) as err:
        polybus.run(app, {f"modules.{module}.cpus": [4095]})
    assert err.value.key == f"modules.{module}.cpus"
    assert "CPU 4095 is not one this process may run on here" in str(err.value)
    assert err.value.file == "overrides"
    assert thread_cpus() == before


def test_check_says_a_cpu_this_machine_does_not_give(
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli.main import main as cli

    assert cli(["check", str(app), "--no-import", "--set", "modules.server.cpus=[4095]"]) == 2
    err = capsys.readouterr().err
    assert "error: --set: modules.server.cpus: CPU 4095 is not one this process may run on" \
        in err, err
    # the replicas of another engine start elsewhere: theirs are not checked here
    assert cli(["check", str(app), "--no-import", "--set", "modules.server.cpus=[4095]",
                "--set", 'cluster.engine="mpi"']) == 0
    assert "CPU 4095" not in capsys.readouterr().err


def test_a_pinned_replica_is_given_no_more_blas_threads_than_its_cpus(
        app: Path, cpus: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The local engine gives each worker its share of the machine's CPUs for BLAS
    (engines/launchenv.py); a replica pinned to one CPU was given the share of all of
    them (one replica on 2 CPUs: 2 threads on its 1)."""
    from polybus.engines.launchenv import BLAS_VARS

    for v in BLAS_VARS:
        monkeypatch.delenv(v, raising=False)
    client = app.parent / "blasclient.py"
    client.write_text("from polybus import use\n\nblas = use('blas')\n\n"
                      "def main():\n    return blas()\n")
    toml = TOML.replace('"client.py"', '"blasclient.py"').replace(
        'use.where = { callstyle = "async" }', "").replace('"client.where" = "server.where"',
                                                            '"client.blas" = "server.blas"')
    cfg = app.parent / "blas.toml"
    cfg.write_text(toml)
    r = polybus.run(cfg, {"modules.server.replication": 1,
                          "modules.server.cpus": [cpus[1]]}, worker_output=False)
    assert r.result == ["1", [[cpus[1]]]]
    r = polybus.run(cfg, {"modules.server.replication": 1}, worker_output=False)
    assert r.result == [str(len(cpus)), [cpus]]  # (not pinned: the whole share)


def test_serve_refuses_a_cpu_this_machine_does_not_give_before_starting(
        tmp_path: Path) -> None:
    from polybus.http.frontdoor import serve
    from polybus.testing.proctree import children

    example = Path(__file__).resolve().parents[2] / "examples" / "rudy" / "app.toml"
    before = children(os.getpid())  # (a test process may have children of its own)
    with pytest.raises(ConfigError) as err:
        serve(example, ["modules.web.cpus=[4095]"], listen="127.0.0.1:0")
    assert err.value.key == "modules.web.cpus"
    assert "CPU 4095 is not one this process may run on here" in str(err.value)
    assert children(os.getpid()) <= before  # (no worker was started)
