"""What the local engine's workers print, forwarded to the run's stderr as it comes.

Each worker writes its stdout and stderr to a log file of its own (the engine reads the
log for its death and start-up diagnostics), so one thread of the run follows the files
as ``tail -f`` does and writes each new complete line to ``out``, prefixed with the
worker's name: ``(server-0) hello``. A line goes out in one write, so lines of different
workers are never mixed within a line. The worker's banner ("polybus worker NAME:
serving ...") is left out; its other lines, polybus's warnings and errors among them,
are not. `close` reads what is left, so nothing printed before the end is lost.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

POLL_S = 0.05
LONGEST = 1 << 16  # bytes: a line longer than this (no newline yet) goes out in pieces


def is_banner(name: str, line: str) -> bool:
    """The line worker ``name`` prints once it serves: noise to a run that started it."""
    return line.startswith(f"polybus worker {name}: serving ")


class _Followed:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.file: BinaryIO | None = None
        with contextlib.suppress(OSError):  # (gone already: nothing to forward)
            self.file = open(path, "rb")  # noqa: SIM115 (kept open until close())
        self.partial = b""

    def lines(self, final: bool) -> list[str]:
        """The complete lines written since the last call (with ``final``, the
        unfinished last one too), decoded, without their newlines."""
        if self.file is None:
            return []
        try:
            data = self.partial + self.file.read()
        except OSError:
            data = self.partial
        *whole, self.partial = data.split(b"\n")
        if final or len(self.partial) > LONGEST:
            if self.partial:
                whole.append(self.partial)
            self.partial = b""
        return [ln.rstrip(b"\r").decode(errors="replace") for ln in whole]

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class LogFollower:
    """Forwards the lines of ``logs`` (worker name, log file) to ``out`` until `close`."""

    def __init__(self, logs: Sequence[tuple[str, Path]], out: TextIO,
                 interval: float = POLL_S) -> None:
        self._files = [_Followed(name, path) for name, path in logs]
        self._out: TextIO | None = out
        self._interval = interval
        self._lock = threading.Lock()  # one pass at a time: the thread's, or the last
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True,
                                        name="polybus-worker-output")

    def start(self) -> LogFollower:
        self._thread.start()
        return self

    def _follow(self) -> None:
        while not self._stop.wait(self._interval):
            self.forward()

    def forward(self, final: bool = False) -> None:
        """Write what the logs gained since the last pass; ``final``: all of it."""
        with self._lock:
            for f in self._files:
                lines = [f"({f.name}) {ln}\n" for ln in f.lines(final)
                         if not is_banner(f.name, ln)]
                if lines and self._out is not None:
                    try:
                        self._out.write("".join(lines))
                        self._out.flush()
                    except (OSError, ValueError):  # a closed or broken stderr: stop trying
                        self._out = None

    def close(self) -> None:
        """Stop following, after forwarding everything the logs hold now."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()
        try:
            self.forward(final=True)
        finally:
            for f in self._files:
                f.close()
