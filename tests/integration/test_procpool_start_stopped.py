"""A replica stopped while its process pool starts (SIGTERM as a worker imports, serve
stopping a worker it had just started again) lets the pool's executor go whole: no
thread of it is left running into the interpreter's exit.

One was: the pool's start, cut short, let its executor go without waiting for its
thread, which then closed its wake-up pipe while the exiting interpreter wrote to it
(CPython 3.11's concurrent.futures, ``_python_exit``): "Exception ignored in: <module
'threading'> ... OSError: [Errno 9] Bad file descriptor" in serve's log, once in 200
`servemix.py --kill` draws. What is checked is that nothing of the executor is left,
which that race needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent("""
    import os, signal, sys, threading
    from pathlib import Path

    def main():
        import concurrent.futures.process as cfp
        from polybus.worker.procpool import ProcessPool
        started = Path(sys.argv[2])
        def stop():  # once a child has begun importing the module: the start is cut short
            while not started.exists():
                threading.Event().wait(0.01)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=stop, daemon=True, name="stopper").start()
        try:
            ProcessPool(2, Path(sys.argv[1]), "slow", "w")
            print("started")
        except KeyboardInterrupt:
            pass
        left = [t.name for t in threading.enumerate() if t.is_alive()
                and t is not threading.main_thread() and t.name != "stopper"]
        print("left", left, len(cfp._threads_wakeups))

    if __name__ == "__main__":
        main()
""")

_SLOW = """
import pathlib, time
pathlib.Path({mark!r}).touch()
time.sleep(30)


def f(x):
    return x
"""


def test_a_pool_start_cut_short_leaves_no_thread_of_its_executor(tmp_path: Path) -> None:
    mark = tmp_path / "importing"
    (tmp_path / "slow.py").write_text(_SLOW.format(mark=str(mark)))
    (tmp_path / "drive.py").write_text(_SCRIPT)
    p = subprocess.run([sys.executable, str(tmp_path / "drive.py"), str(tmp_path / "slow.py"),
                        str(mark)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "left [] 0", (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr


_WORKER = textwrap.dedent("""
    import sys, threading
    from pathlib import Path

    def main():
        import concurrent.futures.process as cfp
        import polybus.worker.main as wm
        from polybus.config import load

        def stopped(*args, **kwargs):  # a stop signal as the replica's runtime is made
            raise KeyboardInterrupt

        wm.WorkerRuntime = stopped
        app = load(sys.argv[1])
        try:
            wm.serve(registry="tcp://127.0.0.1:9", module_path=Path(sys.argv[2]),
                     name="w-0", module_key="w", token=b"t" * 32, spec=app.modules["w"])
        except KeyboardInterrupt:
            pass
        left = [t.name for t in threading.enumerate() if t.is_alive()
                and t is not threading.main_thread()]
        print("left", left, len(cfp._threads_wakeups))

    if __name__ == "__main__":
        main()
""")


def test_a_worker_stopped_once_its_pool_started_ends_the_pool(tmp_path: Path) -> None:
    """A stop signal after the process pool started and before the worker serves (its
    runtime made, its addresses registered): the pool was never closed, its executor's
    threads left running into the exit (the same race as above)."""
    (tmp_path / "quick.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    (tmp_path / "app.toml").write_text(
        '[modules.w]\nsource = "quick.py"\ndefine.f = { pool = "processes:2" }\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    (tmp_path / "drive.py").write_text(_WORKER)
    p = subprocess.run([sys.executable, str(tmp_path / "drive.py"), str(tmp_path / "app.toml"),
                        str(tmp_path / "quick.py")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "left [] 0", (p.stdout, p.stderr)
