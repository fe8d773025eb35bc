"""What the local engine's workers print, forwarded to the run's stderr as it comes.

Each worker writes its stdout and stderr to a log file of its own (the engine reads the
log for its death and start-up diagnostics), so one thread of the run follows the files
as ``tail -f`` does and writes each new complete line to ``out``, prefixed with the
worker's name: ``(server-0) hello``. A line goes out in one write, so lines of different
workers are never mixed within a line. The worker's banner ("polybus worker NAME:
serving ...") is left out; its other lines, polybus's warnings and errors among them,
are not. `close` reads what is left, so nothing printed before the end is lost.

A log is read whether or not its lines go anywhere (``out=None`` drops them), so that
what has been read can be given back: once a log has grown by ``PUNCH_EVERY`` bytes
past what was last freed, the part read, but for its last ``KEEP`` bytes (what the
engine's diagnostics read: the end of a log), is punched out of the file
(``fallocate(PUNCH_HOLE)``: its blocks freed, its length and offsets unchanged, so the
worker appending to it and the reader's position are not disturbed). A server that
prints a line per call for hours then holds a few MiB of disk, not gigabytes. Where
the file system cannot punch holes, the log grows as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

POLL_S = 0.05
LONGEST = 1 << 16  # bytes: a line longer than this (no newline yet) goes out in pieces
PUNCH_EVERY = 4 << 20  # bytes read since the last hole: then the read part is freed
KEEP = 1 << 16  # bytes read but kept before the reader's position (the log's tail)
_PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE (linux/falloc.h)
_BLOCK = 4096


def _fallocate() -> Callable[[int, int, int, int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate_fn = _fallocate()


def punch(fd: int, length: int) -> bool:
    """Free the blocks of the first ``length`` bytes of ``fd`` (rounded down to whole
    blocks), keeping the file's size; False where that cannot be done."""
    length -= length % _BLOCK
    if _fallocate_fn is None:
        return False
    if length <= 0:
        return True
    return _fallocate_fn(fd, _PUNCH, 0, length) == 0


def is_banner(name: str, line: str) -> bool:
    """The line worker ``name`` prints once it serves: noise to a run that started it."""
    return line.startswith(f"polybus worker {name}: serving ")


class _Followed:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.file: BinaryIO | None = None
        for mode in ("r+b", "rb"):  # (writable: a hole is punched through this descriptor)
            with contextlib.suppress(OSError):  # (gone already: nothing to forward)
                self.file = open(path, mode)  # noqa: SIM115 (kept open until close())
                break
        self.partial = b""
        self.freed = 0  # bytes from the start whose blocks were given back
        self.punching = True  # False once the file system said it cannot

    def lines(self, final: bool) -> list[str]:
        """The complete lines written since the last call (with ``final``, the
        unfinished last one too), decoded, without their newlines."""
        if self.file is None:
            return []
        try:
            data = self.partial + self.file.read()
        except OSError:
            data = self.partial
        else:
            self._free_read()
        *whole, self.partial = data.split(b"\n")
        if final or len(self.partial) > LONGEST:
            if self.partial:
                whole.append(self.partial)
            self.partial = b""
        return [ln.rstrip(b"\r").decode(errors="replace") for ln in whole]

    def _free_read(self) -> None:
        assert self.file is not None
        upto = self.file.tell() - KEEP
        if self.punching and upto - self.freed >= PUNCH_EVERY:
            if punch(self.file.fileno(), upto):
                self.freed = upto
            else:
                self.punching = False  # (EOPNOTSUPP: the log grows as it did)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class LogFollower:
    """Forwards the lines of ``logs`` (worker name, log file) to ``out`` until `close`
    (``out=None``: reads and drops them, so the logs' read parts are freed all the same)."""

    def __init__(self, logs: Sequence[tuple[str, Path]], out: TextIO | None,
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
