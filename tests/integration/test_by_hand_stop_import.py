"""A worker started by hand (`polybus worker --config app.toml --as KEY`) stopped while it
imports its module ends as a stop at any other time ("polybus worker: terminated", 143;
"interrupted", 130; "hung up ...", 129), nothing left in its `$TMPDIR`, whatever Python
code the signal landed in. One that landed in a callback whose exceptions Python prints
and drops (a `__del__`, a weakref's callback, importlib's own module-lock callback) was
printed as "Exception ignored in ..." and lost: the worker imported on, registered and
served. Here the module's top level drops an object whose `__del__` says it runs (a file)
and sleeps; the signal comes then. The top level then sleeps 60 s more: a stop noted
only once the import is over would not be prompt either. (SIGHUP killed it there, its
socket folder left in `$TMPDIR`.) So too a top level that catches the stop and goes on."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from integration.conftest import Procs, rest_of, start_registry, wait_gone
from polybus.registry.client import RegistryClient
from polybus.testing.proctree import descendants

SAID = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated"),
        signal.SIGHUP: (129, "hung up (its terminal closed)")}

# Where the signal lands: in a __del__ (the callback), at the top level, at a top
# level that catches it (a bare ``except:`` around its work) and goes on, or as its
# process pool starts (both children importing the module: the pool is ended whole).
_AT = {
    "del": ("class _Slow:\n    def __del__(self):\n        MARK.touch()\n"
            "        time.sleep(60)\n\n\n_Slow()\ntime.sleep(60)\n"),
    "del-last": ("class _Slow:\n    def __del__(self):\n        MARK.touch()\n"
                 "        time.sleep(60)\n\n\n_Slow()\n"),  # (the import's end next)
    "del-loop": ("class _D:\n    def __del__(self):\n        MARK.touch()\n"
                 "        for i in range(20000):\n            i += 1\n\n\n"
                 "end = time.monotonic() + 60\nwhile time.monotonic() < end:\n"
                 "    _D()\n"),  # (nearly all its time in callbacks: each signal too)
    "top": "MARK.touch()\ntime.sleep(60)\n",
    "caught": ("MARK.touch()\ntry:\n    time.sleep(60)\nexcept BaseException:\n"
               "    pass\ntime.sleep(60)\n"),
    "pool": ("import multiprocessing\nif multiprocessing.parent_process() is not None:\n"
             "    MARK.with_name(str(os.getpid())).touch()\n"
             "    if len(list(MARK.parent.glob('[0-9]*'))) == 2:\n"
             "        MARK.touch()\n    time.sleep(60)\n"),
}


def _app(tmp_path: Path, registry: str, at: str) -> Path:
    mark = tmp_path / "in-del"
    (tmp_path / "slow.py").write_text(f"import os, pathlib, time\nMARK = pathlib.Path({str(mark)!r})"
                                      f"\n{_AT[at]}\n\ndef f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("from polybus import use\n\nf = use('f')\n\n\n"
                                        "def main():\n    return f(1)\n")
    app = tmp_path / "app.toml"
    app.write_text(f'[cluster]\nregistry = "{registry}"\n\n'
                   '[modules.server]\nsource = "slow.py"\nreplication = 1\n'
                   'transport = "ipc"\n'
                   + ('define.f.pool = "processes:2"\n' if at == "pool" else "") + '\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
                   '[bind]\n"client.f" = "server.f"\n')
    return app


@pytest.mark.parametrize(("sig", "at"), [
    (signal.SIGTERM, "del"), (signal.SIGINT, "del"), (signal.SIGHUP, "del"),
    (signal.SIGTERM, "del-last"), (signal.SIGTERM, "del-loop"), (signal.SIGTERM, "top"),
    (signal.SIGINT, "top"),
    (signal.SIGTERM, "caught"), (signal.SIGTERM, "pool"), (signal.SIGINT, "pool")],
    ids=["TERM-del", "INT-del", "HUP-del", "TERM-del-last", "TERM-del-loop", "TERM-top",
         "INT-top",
         "TERM-caught", "TERM-pool", "INT-pool"])
def test_a_worker_stopped_as_it_imports_its_module_ends_as_a_stop(
        procs: Procs, tmp_path: Path, sig: int, at: str) -> None:
    token = "stop-in-callback-token-" + "c" * 20
    env = {"POLYBUS_TOKEN": token}
    addr, _ = start_registry(procs, env)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    app = _app(tmp_path, addr, at)
    w = procs.start("worker", "--config", app, "--as", "server", "--name", "server-0",
                    env={**env, "TMPDIR": str(tmp)})
    assert w.stderr is not None
    deadline = time.monotonic() + 30
    while not (tmp_path / "in-del").exists():  # (in the sleep after it)
        assert w.poll() is None and time.monotonic() < deadline, rest_of(w.stderr)
        time.sleep(0.02)
    tree = descendants(w.pid)  # (its pool's children, and multiprocessing's tracker)
    procs.watch(tree)
    w.send_signal(sig)
    status, word = SAID[sig]
    try:
        assert w.wait(timeout=5) == status
    finally:
        if w.poll() is None:
            w.kill()
    said = rest_of(w.stderr)
    assert said == f"polybus worker: {word}\n", said
    assert wait_gone(tree, timeout=5) == set()
    assert list(tmp.iterdir()) == []
    client = RegistryClient(addr, token.encode())
    try:
        assert client.resolve(module="server") == []
    finally:
        client.close()
