"""A run at a shared registry whose replicas are still running calls as it begins (those
of a run that timed out, failed or was interrupted, which run to their end on workers
started by hand) says so: its calls wait behind them, and its time counts that wait. A
sweep's combination after one that timed out was itself reported as timing out, or its
time as its own, with no word of the calls it waited behind."""

from __future__ import annotations

from pathlib import Path

from integration.conftest import Procs, cli, read_line, start_registry


def _program(where: Path) -> Path:
    (where / "s.py").write_text("import time\n\n\ndef f(x, delay):\n"
                                "    time.sleep(delay)\n    return x\n")
    (where / "c.py").write_text('from polybus import use, wait\n\nf = use("f")\n\n\n'
                                "def main(n, delay):\n"
                                "    return sum(wait([f(i, delay) for i in range(n)]))\n")
    (where / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\nreplication = 1\n\n[modules.c]\nsource = "c.py"\n'
        'entrypoint = "main"\nuse.f = { callstyle = "async" }\n\n[bind]\n"c.f" = "s.f"\n')
    return where / "app.toml"


def test_a_run_says_the_replicas_were_busy_as_it_began(procs: Procs, tmp_path: Path) -> None:
    env = {"POLYBUS_TOKEN": "busystart-token-" + "b" * 20}
    app = _program(tmp_path)
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--module", tmp_path / "s.py",
                    "--name", "s-0", env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")

    # idle replicas: nothing said
    p = cli("run", app, "--registry", addr, "--quiet", "--set", "modules.c.args=[2, 0.01]",
            env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "busy" not in p.stderr, p.stderr

    # a run stopped by its time limit leaves its running call (8 s) at the replica
    p = cli("run", app, "--registry", addr, "--quiet", "--timeout", "1",
            "--set", "modules.c.args=[1, 8.0]", env=env, cwd=tmp_path)
    assert p.returncode == 124, p.stderr
    p = cli("run", app, "--registry", addr, "--quiet", "--timeout", "1",
            "--set", "modules.c.args=[2, 0.01]", env=env, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if "busy as this run began" in ln]
    assert len(lines) == 1, p.stderr
    assert "s-0 (1 call running)" in lines[0], lines[0]
    assert "this run's calls wait behind them" in lines[0], lines[0]
