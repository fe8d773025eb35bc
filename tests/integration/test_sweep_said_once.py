"""`polybus sweep` end to end against workers started by hand: the warning each run
says (more replicas registered than the replication uses, naming the ones each run took
in turn) and a configuration note each run says again (its client module, imported anew
each run, sets a warnings filter) are said once, and their repeats counted at the end.
`polybus run` still says its warning."""

from __future__ import annotations

from pathlib import Path

from integration.conftest import EXAMPLES, Procs, cli, read_line, start_registry

SORT = EXAMPLES / "sort"


def test_a_sweep_says_each_warning_of_its_runs_once(procs: Procs, tmp_path: Path) -> None:
    env = {"POLYBUS_TOKEN": "said-once-token-" + "o" * 20}
    addr, _ = start_registry(procs, env)
    for i in range(3):
        w = procs.start("worker", "--registry", addr, "--module", SORT / "server.py",
                        "--name", f"server-{i}", env=env)
        assert w.stderr is not None
        read_line(w.stderr, "serving")
    (tmp_path / "server.py").write_text((SORT / "server.py").read_text())
    (tmp_path / "client.py").write_text(
        "import warnings\nwarnings.filterwarnings('ignore', category=DeprecationWarning)\n"
        + (SORT / "client.py").read_text())
    (tmp_path / "app.toml").write_text((SORT / "app.toml").read_text())
    sets = ["--set", f'cluster.registry="{addr}"', "--set", "modules.server.replication=1",
            "--set", "modules.client.use.quicksort.linger=1ms"]  # (linger: a note)
    p = cli("sweep", tmp_path / "app.toml", "--vary", "modules.client.args=[2000,1],[3000,1]",
            "--repeat", "2", "--quiet", *sets, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    counts = [ln for ln in lines if "3 replicas registered, replication = 1" in ln]
    notes = [ln for ln in lines if "linger is how long a batch may wait" in ln]
    assert len(counts) == 2 and len(notes) == 2, p.stderr  # (said, and counted at the end)
    assert counts[0].startswith("polybus: warning: module 'server': 3 replicas registered")
    assert counts[1].startswith("polybus sweep: 3 more runs said this warning again, ")
    assert notes[0].startswith("warning: --set: modules.client.use.quicksort.linger: ")
    assert notes[1].startswith("polybus sweep: 3 more runs said this warning again (said "
                               "once, above): warning: --set: modules.client.use.quicksort")
    p = cli("run", tmp_path / "app.toml", "--quiet", *sets,
            "--set", "modules.client.args=[2000,1]", env=env)
    assert p.returncode == 0, p.stderr
    assert "3 replicas registered, replication = 1" in p.stderr
    assert "more runs" not in p.stderr
