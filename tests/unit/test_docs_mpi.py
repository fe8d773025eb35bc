"""The README's mpiexec command runs as written, launched as the tests launch the mpi
engine (testing/engines.py `command`, through bench/peers/mpi.py `launcher`).

From a new-user trial: `mpiexec -n 3 polybus run examples/sort/app.toml --set
cluster.engine=mpi` failed on a 2-core machine with Open MPI's "not enough slots" (the
prose named --oversubscribe, the command did not), and as root it needs
--allow-run-as-root, which nothing said."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from polybus.bench.peers import mpi as peer
from polybus.config import load
from polybus.engines import served

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
GUIDE = (ROOT / "docs" / "guide.md").read_text()


def _readme_mpiexec() -> list[str]:
    lines = [ln for ln in README.splitlines() if ln.startswith("mpiexec ")]
    assert len(lines) == 1, lines
    return shlex.split(lines[0], comments=True)


def _tests_options(monkeypatch: pytest.MonkeyPatch, root: bool) -> list[str]:
    """The options the tests give mpiexec (without the private network namespace, a
    test's own), as a user or as root."""
    monkeypatch.setattr(peer, "mpiexec", lambda: "mpiexec")
    monkeypatch.setattr(peer, "_netns_prefix", lambda: [])
    monkeypatch.setattr(peer.os, "geteuid", lambda: 0 if root else 1000)
    argv = peer.launcher()
    assert argv[0] == "mpiexec", argv
    return argv[1:]


def test_the_readme_mpiexec_command_runs_the_sort_example_on_the_right_ranks() -> None:
    argv = _readme_mpiexec()
    n = argv.index("-n")
    assert argv[n + 2:n + 4] == ["polybus", "run"], argv
    config = argv[n + 4]
    app = load(ROOT / config)
    assert int(argv[n + 1]) == 1 + len(served.replicas_in_order(app)), argv
    assert argv[-2:] == ["--set", "cluster.engine=mpi"], argv


def test_the_readme_mpiexec_command_has_the_options_the_tests_launch_with(
        monkeypatch: pytest.MonkeyPatch) -> None:
    given = _readme_mpiexec()
    options = given[1:given.index("-n")]
    # (--bind-to none: the benchmarks' ranks pin themselves; a run is placed as Open
    # MPI places it)
    wanted = [o for o in _tests_options(monkeypatch, root=False)
              if o not in ("--bind-to", "none")]
    assert wanted == options, (wanted, options)
    as_root = set(_tests_options(monkeypatch, root=True)) - set(wanted)
    assert as_root == {"--allow-run-as-root", "--bind-to", "none"}
    section = GUIDE[GUIDE.index("## Under mpiexec, or on a Ray cluster"):]
    section = section[:section.index("\nUnder ray,")]
    assert re.search(r"as root.{0,80}`--allow-run-as-root`", section, re.S), section
