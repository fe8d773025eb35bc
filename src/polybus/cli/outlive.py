"""The program's threads that outlive a command (its entrypoint returned or raised).

Python waits for non-daemon threads at exit, and so does `polybus run`: a thread that
finishes its work after the entrypoint returned is let finish. But in the interpreter's
wait a SIGTERM was taken as an exception there and ignored (the run ended with the
command's status, 0, as if nothing came) or, if it came just before, consumed by the
command, leaving the process deaf while the threads looped over calls that fail once
the run is over. So once the command is done, SIGTERM and Ctrl-C end the process at
once (143, 130), saying how many of the program's threads go with it; a wait that
lasts says which threads it waits for, once. The interpreter's own exit steps run as
before, in their order (an idle `ThreadPoolExecutor` the program never shut down is
told to stop by them, and its threads end).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import FrameType

__all__ = ["SAY_AFTER_S", "end_now", "program_threads", "watch"]

SAY_AFTER_S = 2.0  # a wait at exit this long says what it waits for


def program_threads() -> list[threading.Thread]:
    """Threads the program started that are still running (polybus's own are daemons)."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def end_now(command: str, code: int, what: str, end: bool = True) -> None:
    """Say ``what`` ("terminated") for ``command``; with ``end``, and the program's
    threads still running (the interpreter would wait for them), say how many and end
    the process with ``code``."""
    left = len(program_threads()) if end else 0
    said = f"polybus {command}: {what}"
    if left:
        said += f"; {left} thread(s) of the program were still running and end with it"
    try:
        print(said, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, RuntimeError):  # (a closed pipe; a write under way)
        pass
    if left:
        os._exit(code)


def watch(command: str) -> None:
    """From now on (the command is done) a SIGTERM or Ctrl-C ends the process at once;
    and a wait for the program's threads that lasts says which."""
    def stop(signum: int, frame: FrameType | None) -> None:
        end_now(command, 128 + signum, "terminated" if signum == signal.SIGTERM
                else "interrupted")
        os._exit(128 + signum)  # (no thread left: nothing to wait for either)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if program_threads():
        threading.Thread(target=_say_later, args=(command,), daemon=True,
                         name="polybus-outlived").start()


def _say_later(command: str) -> None:
    time.sleep(SAY_AFTER_S)
    left = program_threads()
    if left:
        print(f"polybus {command}: waiting for the program's threads still running "
              f"({', '.join(t.name for t in left)}); Ctrl-C or SIGTERM ends the run",
              file=sys.stderr, flush=True)
