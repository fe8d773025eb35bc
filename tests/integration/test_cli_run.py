"""`polybus run` and `polybus check` as a user types them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from integration.conftest import EXAMPLES, ROOT, cli
from polybus.testing.apps import write_app, write_bound_app

CALC = ROOT / "tests" / "integration" / "apps" / "calc" / "app.toml"


def test_json_output_and_set_overrides(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    p = cli("run", EXAMPLES / "matmul" / "app.toml", "--set", "modules.server.replication=3",
            "--set", "modules.client.args=[30]", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout and "'n': 30" in p.stdout
    assert "server-2" in p.stderr and "calls" in p.stderr   # the summary table
    data = json.loads(out.read_text())
    assert {"result", "elapsed_s", "startup_s", "calls", "bytes_sent", "bytes_received",
            "replicas"} <= set(data)
    assert data["result"]["correct"] is True and data["calls"] == 30
    assert [r["name"] for r in data["replicas"]] == ["server-0", "server-1", "server-2"]
    for r in data["replicas"]:
        assert {"name", "calls", "busy_s"} <= set(r) and r["calls"] == 10
    assert data["bytes_sent"] > data["bytes_received"] > 0


def broken(tmp_path: Path, callstyle: str = "sometimes") -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "server.py").write_text(
        "import os\nopen(os.environ['MARK'], 'a').write('imported\\n')\n\ndef f(x):\n    return x\n")
    (tmp_path / "client.py").write_text(
        "from polybus import use\nf = use('f')\n\ndef main():\n    return f(1)\n")
    app = tmp_path / "app.toml"
    app.write_text(f"""
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.f = {{ callstyle = "{callstyle}" }}

[bind]
"client.f" = "server.f"
""")
    return app


def test_check_reports_file_key_and_hint(tmp_path: Path) -> None:
    app = broken(tmp_path)
    mark = tmp_path / "mark"
    p = cli("check", app, env={"MARK": str(mark)})
    assert p.returncode == 2
    assert str(app) in p.stderr or "app.toml" in p.stderr
    assert "modules.client.use.f.callstyle" in p.stderr
    assert "sync" in p.stderr  # the valid styles are named
    assert not mark.exists()  # a configuration with mistakes: no module is imported
    ok = cli("check", broken(tmp_path / "good", "async"), env={"MARK": str(mark)})
    assert ok.returncode == 0, ok.stderr
    # a valid one: each module is imported once, in a child process (test_module_errors)
    assert mark.read_text() == "imported\n"


def test_a_binding_nothing_uses_is_a_warning_and_the_run_goes_ahead(tmp_path: Path) -> None:
    app = broken(tmp_path, "sync")
    app.write_text(app.read_text() + '"client.ff" = "server.f"\n')
    mark = tmp_path / "mark"
    for command in ("check", "run"):
        p = cli(command, app, env={"MARK": str(mark)})
        assert p.returncode == 0, p.stderr
        warning = [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")]
        assert len(warning) == 1 and 'bind."client.ff"' in warning[0], p.stderr
        assert "did you mean 'f'?" in warning[0] and "app.toml" in warning[0]
    assert p.stdout.strip() == "1"  # (the run's result)


def test_run_refuses_a_broken_config_before_starting_processes(tmp_path: Path) -> None:
    app = broken(tmp_path)
    mark = tmp_path / "mark"
    p = cli("run", app, env={"MARK": str(mark)})
    assert p.returncode == 2
    assert "callstyle" in p.stderr
    assert not mark.exists()  # no worker ever imported the server module
    good = cli("run", broken(tmp_path / "good", "async"), "--quiet", env={"MARK": str(mark)})
    assert good.returncode == 0, good.stderr
    assert mark.read_text().count("imported") == 2  # the marker works: 2 workers


def test_a_define_table_made_by_set_leaves_the_other_interfaces_served(
        tmp_path: Path) -> None:
    # --set 'modules.server.define.f.cache=["b"]' on a module with no define table made
    # that table all the module served: g, bound and called, was refused.
    (tmp_path / "server.py").write_text(
        "def f(a, b):\n    return float(a.sum() + b.sum())\n\n\n"
        "def g(x):\n    return x + 1\n")
    (tmp_path / "client.py").write_text(
        "import numpy as np\nfrom polybus import use\nf, g = use('f'), use('g')\n\n\n"
        "def main():\n    b = np.ones(100_000)\n"
        "    return [f(np.ones(3), b) for _ in range(3)] + [g(1)]\n")
    app = tmp_path / "app.toml"
    app.write_text('[modules.server]\nsource = "server.py"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
                   '[bind]\n"client.f" = "server.f"\n"client.g" = "server.g"\n')
    p = cli("run", app, "--quiet", "--set", 'modules.server.define.f.cache=["b"]')
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[100003.0, 100003.0, 100003.0, 2]"


def test_unknown_key_gets_nearest_name(tmp_path: Path) -> None:
    p = cli("check", EXAMPLES / "matmul" / "app.toml", "--set", "modules.server.replicaton=2")
    assert p.returncode == 2
    assert "replicaton" in p.stderr and "replication" in p.stderr
    assert os.path.basename("app.toml") in p.stderr


def test_a_json_file_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    """A --json that passes the check before the run but fails as it is written (a full
    disk) is an error that names it, not an OSError traceback out of json.dump."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full (Linux)")
    (tmp_path / "client.py").write_text("def main():\n    return list(range(100000))\n")
    app = tmp_path / "app.toml"
    app.write_text('[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    p = cli("run", app, "--quiet", "--json", "/dev/full")
    assert p.returncode == 2
    assert "polybus run: error: --json /dev/full: could not be written: No space left" \
        in p.stderr
    assert "Traceback" not in p.stderr


DIES_AT_3 = """
    import os

    def f(x):
        if x == 3:
            os._exit(3)
        return x
"""


def _app_of_f(tmp_path: Path, client: str, *, define: str = "", use: str = "") -> Path:
    """server.py (DIES_AT_3, 2 replicas), ``client`` and their app.toml."""
    return write_app(tmp_path, server=DIES_AT_3, client=client, toml=f"""
        [modules.server]
        source = "server.py"
        replication = 2
        {define}

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        {use}

        [bind]
        "client.f" = "server.f"
    """)


def test_a_replica_lost_during_the_run_is_marked_in_the_summary_and_the_json(
        tmp_path: Path) -> None:
    # A worker that died mid-run showed as "server-1 | 0 calls", like an idle one.
    app = _app_of_f(tmp_path, """
        from polybus import use
        from polybus.errors import WorkerDiedError

        f = use("f")

        def main():
            out = []
            for x in range(8):
                try:
                    out.append(f(x))
                except WorkerDiedError:
                    out.append(None)
            return out
    """, define="define.f = { idempotent = false }")
    p = cli("run", app, "--json", tmp_path / "run.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[0, 1, 2, None, 4, 5, 6, 7]"
    d = json.loads((tmp_path / "run.json").read_text())
    lost = [r["name"] for r in d["replicas"] if r["lost"]]
    assert len(lost) == 1 and len(d["replicas"]) == 2, d["replicas"]
    assert f"{lost[0]} (lost)" in p.stderr, p.stderr
    kept = next(r["name"] for r in d["replicas"] if not r["lost"])
    assert f"{kept} (lost)" not in p.stderr
    # said when it went, not only in the summary (which --quiet leaves out); and its busy
    # time, which a lost replica cannot be asked for, shows as not known, not as 0
    warned = [ln for ln in p.stderr.splitlines() if "was lost" in ln]
    assert warned == [f"polybus: warning: replica {lost[0]} of module 'server' was lost: "
                      + warned[0].split(" was lost: ", 1)[1]], p.stderr
    # and how its worker ended, from the engine that started it (a new user's kill -9 and
    # os._exit alike said only "closed the connection")
    assert warned[0].endswith("; its worker exited with status 3"), warned
    [row] = [ln for ln in p.stderr.splitlines() if f"{lost[0]} (lost)" in ln]
    assert row.count("?") == 3 and "0.0000" not in row, row
    # and the JSON says not known (null) as the summary does, not 0.0 (a script summing
    # busy times, or plotting busy fractions, took the lost replica for an idle one)
    [gone] = [r for r in d["replicas"] if r["lost"]]
    assert (gone["busy_s"], gone["queue_wait_s"], gone["busy_fraction"]) == (None,) * 3, gone
    [other] = [r for r in d["replicas"] if not r["lost"]]
    assert all(isinstance(other[k], float) for k in ("busy_s", "queue_wait_s", "busy_fraction"))


@pytest.mark.parametrize("aggregate", [False, True])
def test_a_call_that_ends_every_replica_it_runs_on_is_named_as_the_likely_cause(
        tmp_path: Path, aggregate: bool) -> None:
    # It was re-run after each loss and took both replicas with it; the error said only
    # "every replica of f is gone (last: ...: closed the connection)".
    use = '{ callstyle = "async", aggregate = 4 }' if aggregate else '{ callstyle = "sync" }'
    app = _app_of_f(tmp_path, """
        from polybus import use, wait

        f = use("f")

        def main():
            return wait([f(x) for x in range(6)])
    """, use=f"use.f = {use}")
    p = cli("run", app, "--json", tmp_path / "failed.json", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "every replica of f is gone" in p.stderr, p.stderr
    # --json says why there is no result (it wrote no file)
    error = json.loads((tmp_path / "failed.json").read_text())["error"]
    assert error["type"] == "ConnectionLostError", error
    assert "every replica of f is gone" in error["message"]
    # and which call, where: the line of the client it came out at (it said neither)
    line = 1 + (tmp_path / "client.py").read_text().splitlines().index(
        "    return wait([f(x) for x in range(6)])")
    assert error["call_site"] == f"{tmp_path / 'client.py'}:{line}", error
    assert f'client.py", line {line}, in ' in p.stderr, p.stderr
    if not aggregate:  # (one call, by its arguments; a batch's calls fail as one)
        assert "the call f(3) was lost: every replica of f is gone" in p.stderr, p.stderr
    assert "this call was running on each of the 2 replicas that went, so it may be what " \
           "ends them" in p.stderr and "define.f.idempotent = false" in p.stderr, p.stderr
    # and what became of the workers, from the processes the run started
    for name in ("server-0", "server-1"):
        assert f"\n  worker {name} exited with status 3\n" in p.stderr + "\n", p.stderr


def test_busy_share_is_of_the_pool_not_past_a_hundred_percent(tmp_path: Path) -> None:
    """Two calls that run at once in a pool of two: their durations add up to about twice
    the run, which showed as ~200 busy %; the share is of the replica's two handlers."""
    from polybus import run

    app = write_app(tmp_path, server="""
        import time

        def nap(s):
            time.sleep(s)
            return s
    """, client="""
        from polybus import use, wait

        nap = use("nap")

        def main():
            first, second = nap(0.3), nap(0.3)
            return wait(first) + wait(second)
    """, toml="""
        [modules.server]
        source = "server.py"
        define.nap = { pool = 2 }

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        use.nap = { callstyle = "async" }

        [bind]
        "client.nap" = "server.nap"
    """)
    r = run(app)
    (rep,) = r.replicas
    assert r.result == 0.6 and rep.calls == 2 and rep.handlers == 2
    assert rep.busy_s >= 0.6  # (each call slept its 0.3 s)
    assert rep.busy_fraction == rep.busy_s / (r.elapsed_s * 2) <= 1.0
    assert "handlers" in r.to_json()["replicas"][0]


def test_json_to_standard_output_and_a_remote_error_s_own_fields(tmp_path: Path) -> None:
    """``--json -`` wrote a file named "-"; it now goes to standard output, the result
    printed only there. A server's exception is in fields of its own (a script had to
    parse "server.InputError: ..." out of the message)."""
    app = write_bound_app(tmp_path, server="""
        class InputError(ValueError):
            pass

        def f(x):
            if x < 0:
                raise InputError(f"negative: {x}")
            return x * 2
    """, client="""
        from polybus import use

        f = use("f")

        def main(x=3):
            print("the program's own line")  # (to stderr with --json -: stdout is the JSON's)
            return f(x)
    """, names=("f",))
    p = cli("run", app, "--json", "-", "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"] == 6 and not (tmp_path / "-").exists()
    p = cli("run", app, "--json", "-", "--quiet", "--set", "modules.client.args=[-1]",
            cwd=tmp_path)
    assert p.returncode != 0
    error = json.loads(p.stdout)["error"]
    assert error["type"] == "RemoteException" and error["remote_type"] == "server.InputError"
    assert error["remote_message"] == "negative: -1" and error["interface"] == "f"
    assert error["replica"] == "server-0" and "raise InputError" in error["remote_traceback"]
    assert "the program's own line" in p.stderr
