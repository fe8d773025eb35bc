"""A promise kept past the run that made it (client/ended.py).

A new user kept a promise in a global, the run ended (the program raised) before its
answer came, and a later `polybus.run` passed it to a call: that run hung for ever,
after a warning that the *old* run's replica was lost (its Forward went to a closed
connection). `polybus.wait` of it said ``ValueError: file descriptor cannot be a
negative integer (-1)``, and ``.done`` ``I/O operation on closed epoll object``. A
promise of a live outer run passed to a nested run's call was forwarded across runs
(another cluster token), and the inner run timed out. Each program runs in a process of
its own, killed with its workers if it hangs.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from integration.conftest import descendants, env_with, kill_all
from polybus.testing.apps import write_app

SERVER = """
    import time

    def slow(t):
        time.sleep(t)
        return t

    def square(x):
        return x * x
"""

CLIENT = """
    import builtins
    import time
    from polybus import use, wait

    slow = use("slow")
    square = use("square")
    agg = use("agg")

    def first():
        builtins.ANSWERED = slow(0)
        wait(builtins.ANSWERED)             # answered within its run: kept
        p = slow(0.3)
        wait(square(p))                     # p's value forwarded, left on its replica
        while not p.done:                   # (its answer, a Ref, taken in)
            time.sleep(0.01)
        builtins.FORWARDED = p
        builtins.KEPT = slow(60)            # still running when the run ends
        builtins.AGG = agg(60)              # in an open batch when the run ends (the
                                            # last call: slow's next would write it)
        raise KeyError("oops")

    def timed():
        builtins.KEPT = slow(60)
        return wait(builtins.KEPT)          # stopped by the run's time limit

    def second():
        return square(builtins.KEPT) + 0

    def again():
        return square(builtins.ANSWERED) + 0
"""

TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "first"
    use.slow = {{ callstyle = "async" }}
    use.square = {{ callstyle = "{square}"{forward} }}
    use.agg = {{ callstyle = "async", aggregate = 4, linger = "60s" }}

    [bind]
    "client.slow" = "server.slow"
    "client.square" = "server.square"
    "client.agg" = "server.slow"
"""


def _program(tmp_path: Path, driver: str, square: str = "async", forward: str = "") -> Path:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(square=square, forward=forward))
    (tmp_path / "drive.py").write_text(textwrap.dedent(driver))
    return app


def _drive(tmp_path: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """Run drive.py to its end; if it hangs, kill it and its workers, and fail."""
    p = subprocess.Popen([sys.executable, "drive.py"], cwd=tmp_path, env=env_with(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all(descendants(p.pid))
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"drive.py still running after {timeout:g} s:\n{out}\n{err}")
    finally:
        if p.poll() is None:
            kill_all(descendants(p.pid))
            p.kill()
            p.communicate()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


FIRST = """
    import builtins, polybus

    try:
        polybus.run("app.toml", worker_output=False)
    except KeyError as e:
        print("run 1 raised", repr(e), flush=True)
"""

PASSED_ON = FIRST + """
    try:
        polybus.run("app.toml", {"modules.client.entrypoint": "second"},
                    worker_output=False)
        print("run 2 returned")
    except Exception as e:
        print("run 2 raised", type(e).__name__, str(e).replace("\\n", " | "))
    print("run 3:", polybus.run("app.toml", {"modules.client.entrypoint": "again"},
                                worker_output=False).result)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("square", "forward"), [("async", ""), ("async", ", forward = false"),
                                                 ("sync", "")])
def test_a_promise_of_an_ended_run_passed_to_a_call_of_a_later_run_raises_at_once(
        tmp_path: Path, square: str, forward: str) -> None:
    _program(tmp_path, PASSED_ON, square, forward)
    p = _drive(tmp_path)
    assert p.returncode == 0, p.stderr
    assert "run 1 raised KeyError('oops')" in p.stdout, p.stdout
    assert ("run 2 raised StalePromiseError this promise belongs to a run that has ended "
            "(call slow(60) of server-0); its answer never came: use the value within "
            "its run") in p.stdout, p.stdout
    # (the user's line, as for any failed call: callsite.py)
    line = textwrap.dedent(CLIENT).splitlines().index(
        "    return square(builtins.KEPT) + 0") + 1
    assert f'client.py", line {line}, in second:' in p.stdout, p.stdout
    # A promise answered within its run is its value in a later one.
    assert "run 3: 0" in p.stdout, p.stdout
    assert "was lost" not in p.stderr, p.stderr  # (nothing of the old run's replica)


USED_AFTER = """
    import builtins, polybus

    def look(name, p):
        print(name, "done", p.done, flush=True)
        try:
            print(name, "wait returned", polybus.wait(p))
        except Exception as e:
            print(name, "wait raised", type(e).__name__, e, flush=True)

    try:
        polybus.run("app.toml", {"modules.client.entrypoint": ENTRY},
                    worker_output=False, **KW)
    except BaseException as e:
        print("run 1 raised", type(e).__name__, flush=True)
    for name in NAMES:
        look(name, getattr(builtins, name))
    try:
        list(polybus.as_completed([builtins.KEPT], timeout=60))
    except Exception as e:
        print("as_completed raised", type(e).__name__, flush=True)
    try:
        polybus.wait(builtins.KEPT, timeout=60)
    except Exception as e:
        print("wait with a timeout raised", type(e).__name__, flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ended", ["raised", "timed out"])
def test_a_promise_of_an_ended_run_is_not_done_and_its_wait_says_why(
        tmp_path: Path, ended: str) -> None:
    setup = ('ENTRY, KW, NAMES = "first", {}, ["ANSWERED", "FORWARDED", "AGG", "KEPT"]\n'
             if ended == "raised" else
             'ENTRY, KW, NAMES = "timed", {"timeout": 0.5}, ["KEPT"]\n')
    _program(tmp_path, setup + textwrap.dedent(USED_AFTER))
    p = _drive(tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert f"run 1 raised {'KeyError' if ended == 'raised' else 'RunTimeout'}" in out, out
    assert "KEPT done False" in out, out
    assert ("KEPT wait raised StalePromiseError this promise belongs to a run that has "
            "ended (call slow(60) of server-0); its answer never came") in out, out
    assert "as_completed raised StalePromiseError" in out, out
    assert "wait with a timeout raised StalePromiseError" in out, out
    if ended == "raised":
        assert "ANSWERED done True\nANSWERED wait returned 0" in out, out
        # (forwarded, unless slow(0.3) ended before the Forward reached its replica:
        # then answered by value, kept as ANSWERED is)
        assert ("FORWARDED wait raised StalePromiseError this promise belongs to a run "
                "that has ended (call slow(0.3) of server-0); its value stayed on that "
                "replica (forwarded to another call)") in out or (
                    "FORWARDED wait returned 0.3" in out), out
        assert "AGG done False" in out, out
        assert ("AGG wait raised StalePromiseError this promise belongs to a run that has "
                "ended (call slow(60), not yet sent to a replica)") in out, out
    assert "ValueError" not in out + p.stderr
    assert "was lost" not in p.stderr, p.stderr


OUTER = """
    import builtins, polybus
    from polybus import use

    slow = use("slow")

    def main():
        builtins.OUTER = slow(1)
        return polybus.run("inner.toml", worker_output=False, timeout=30).result
"""

INNER = """
    import builtins
    from polybus import use

    square = use("square")

    def main():
        return square(builtins.OUTER) + 0
"""

INNER_TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "inner.py"
    entrypoint = "main"
    use.square = {{ callstyle = "async"{forward} }}

    [bind]
    "client.square" = "server.square"
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("forward", ["", ", forward = false"])
def test_a_promise_of_a_live_outer_run_goes_to_a_nested_runs_call_by_value(
        tmp_path: Path, forward: str) -> None:
    write_app(tmp_path, server=SERVER, client=OUTER, toml=TOML.format(
        square="async", forward="").replace('entrypoint = "first"', 'entrypoint = "main"'))
    (tmp_path / "inner.py").write_text(textwrap.dedent(INNER))
    (tmp_path / "inner.toml").write_text(textwrap.dedent(INNER_TOML.format(forward=forward)))
    (tmp_path / "drive.py").write_text(
        'import polybus\nprint("result", polybus.run("app.toml", worker_output=False).result)\n')
    p = _drive(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "result 1" in p.stdout, p.stdout
    assert "was lost" not in p.stderr, p.stderr
