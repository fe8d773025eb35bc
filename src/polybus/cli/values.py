"""Command-line values checked before anything starts: output files (--json, --csv), so
a mistyped directory does not cost a whole run and end in a traceback; durations, read
as the configuration reads them. And the output files written at a command's end
(`save`): one that cannot be written even so is said in a line, not a traceback."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from polybus.config.files import NUL_SAID, has_nul
from polybus.config.units import DURATION_FORMS, parse_duration
from polybus.errors import ConfigError, UsageError


def check_writable(path: str | None, option: str) -> None:
    """UsageError naming ``option`` if ``path`` could not be written (None: not asked)."""
    if path is None:
        return
    check_name(path, option)
    p = Path(path)
    try:
        _check_writable(p, option, path)
    except OSError as exc:  # (a name too long: the check itself ended in a traceback)
        raise UsageError(f"{option} {path}: cannot be written: "
                         f"{exc.strerror or exc}") from None


def check_out_dir(path: str, option: str, files: Sequence[str]) -> None:
    """``option``'s directory (``--out DIR``), before anything runs: a directory, or made
    now (so that a mistyped one fails here, not after the runs), and each of ``files``
    (those written in it at the end) writable. UsageError naming ``option`` otherwise:
    `polybus bench --out FILE` ran every benchmark and only then failed, "File exists"."""
    check_name(path, option)
    p = Path(path)
    try:
        if p.exists() and not p.is_dir():
            raise UsageError(f"{option} {path}: not a directory")
        if not p.is_dir():
            above = next((a for a in p.parents if a.exists()), None)
            if above is not None and not above.is_dir():
                raise UsageError(f"{option} {path}: {above} is not a directory")
            try:
                p.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # (/proc/x; a directory not ours; a link to nothing)
                raise UsageError(f"{option} {path}: cannot be made: "
                                 f"{exc.strerror or exc}") from None
        for file in files:
            if Path(file).is_dir():
                raise UsageError(f"{option} {path}: {file} is a directory, where the "
                                 "file would be written")
            _check_writable(Path(file), option, file)
    except OSError as exc:  # (a name too long)
        raise UsageError(f"{option} {path}: cannot be written: "
                         f"{exc.strerror or exc}") from None


def check_name(path: str, option: str) -> None:
    """UsageError naming ``option`` if ``path`` is no file's name (a NUL in it, which
    only a caller of ``main`` from Python can pass: Path raised ValueError)."""
    if has_nul(path):
        raise UsageError(f"{option} {path!r}: {NUL_SAID}")


def check_distinct(outputs: Sequence[tuple[str, str | None]],
                   inputs: Sequence[tuple[str, str]] = ()) -> None:
    """UsageError if an output file (``(option, path)``; None: not asked) is one of
    ``inputs`` (``(what it is, path)``: the configuration a sweep reads) or the file of
    an output before it. ``--csv app.toml`` replaced the configuration being swept, and
    ``--json F --csv F`` kept only the CSV, silently. ``-`` (standard output) is
    compared by name: two outputs cannot both go there."""
    def where(path: str) -> str:  # (a NUL: no file's name, so none of the others)
        return path if path == "-" or has_nul(path) else os.path.realpath(path)

    read = {where(path): what for what, path in inputs}
    written: dict[str, tuple[str, str]] = {}
    for option, path in outputs:
        if path is None:
            continue
        check_name(path, option)
        key = where(path)
        if key in read:
            raise UsageError(f"{option} {path}: is {read[key]}, which it would replace; "
                             "name another file")
        if key in written:
            first, given = written[key]
            said = ("standard output" if path == "-" else "the same file") + \
                f" as {first} {given}"
            raise UsageError(f"{option} {path}: {said}; give each output a file of its own")
        written[key] = (option, path)


def read_files(what: str, config: str, sources: Mapping[str, str]
               ) -> list[tuple[str, str]]:
    """`check_distinct`'s ``inputs`` for a command that reads ``config`` (``what`` it is
    to the command: "the configuration being swept") and the module sources ``sources``
    (file: module key)."""
    return [(what, config), *((f"module {key}'s source", src) for src, key in sources.items())]


def _check_writable(p: Path, option: str, path: str) -> None:
    parent = p.parent
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        above = next((a for a in (parent, *parent.parents) if a.exists()), None)
        if above is not None and not above.is_dir():  # (not "does not exist": it does)
            raise UsageError(f"{option} {path}: {above} is not a directory")
        raise UsageError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (
            p.exists() and not os.access(p, os.W_OK) and os.path.lexists(p)):
        # (looked at again: another's probe may have made it and removed it since)
        raise UsageError(f"{option} {path}: not writable by this user")
    _probe(p, option, path)


def _probe(p: Path, option: str, path: str) -> None:
    """Open ``p`` as the end will write it, when that can neither block nor change
    anything: what the looks above pass but no write can do (/proc/x.csv, a read-only
    file system, any file for root, whom os.access never refuses). A regular file that
    exists is opened for appending, without writing; a new name is created (``O_EXCL``:
    this probe made it) and removed. A FIFO or device (an open may wait for a reader,
    and a reader would see its end) and a link to nothing (opening would make its
    target) are left for the end."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISREG(st.st_mode):
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
            except FileNotFoundError:  # (another's probe made it and removed it since:
                pass  # every rank of an mpi run checks the same --json at once)
        return
    if os.path.lexists(p):  # (a link to nothing)
        return
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileNotFoundError:  # (the directory is there: /proc's kind takes no new file)
        raise UsageError(f"{option} {path}: cannot be written: {p.parent} takes no new "
                         "file") from None
    except FileExistsError:  # (made meanwhile by another: the end writes it)
        return
    os.close(fd)
    p.unlink(missing_ok=True)


STDOUT = "-"
"""The file name of standard output, for --json and --csv (as ``polybus run --json -``)."""


def write_text(text: Callable[[], str], path: str) -> None:
    """``text()`` to the file ``path``, or to standard output for ``-`` (made whole first,
    so a mistake in it leaves no half-written file)."""
    made = text()
    if path == STDOUT:
        sys.stdout.write(made)
        sys.stdout.flush()
        return
    Path(path).write_text(made, encoding="utf-8")


def save(command: str, option: str, path: str, write: Callable[[str], object]) -> bool:
    """``write(path)``, one output file at a command's end; False, and one line on stderr
    (``polybus sweep: error: --csv F: could not be written: <reason>``), if it could not
    be written though checked before the runs (the directory removed meanwhile, a full
    disk, /proc). The caller goes on to its other outputs and exits 2: an OSError
    traceback lost them, after every run had been paid for."""
    try:
        write(path)
    except OSError as exc:
        print(f"polybus {command}: error: {option} {path}: could not be written: "
              f"{exc.strerror or exc}", file=sys.stderr, flush=True)
        return False
    return True


def seconds(text: str) -> float:
    """An argparse type: a duration > 0, written bare (``3``, ``0.5``, ``250ms``, ``2s``)
    or as the configuration writes one, a TOML string (``"250ms"``, ``'2s'``, as --set
    reads it: config/units.py). A --ttl of -1 dropped every worker at once; a
    --heartbeat of 0 spun a CPU; ``--timeout '"2m"'``, as the README wrote it, was
    refused."""
    try:
        value: float | None = parse_duration(_unquoted(text))
    except ConfigError:
        value = None
    if value is None or not value > 0:
        raise argparse.ArgumentTypeError(f"expected a duration > 0 ({DURATION_FORMS}), "
                                         f"got {text!r}")
    return value


def heartbeat_seconds(text: str) -> float:
    """An argparse type: `seconds`, within what ``[cluster] heartbeat`` takes
    (config/cluster.py): ``--heartbeat 1us`` spun the worker on heartbeats."""
    from polybus.config.cluster import MIN_HEARTBEAT
    from polybus.config.schema import LONGEST

    value = seconds(text)
    if not MIN_HEARTBEAT[0] <= value <= LONGEST[0]:
        why = "too short to keep" if value < MIN_HEARTBEAT[0] else "too long"
        raise argparse.ArgumentTypeError(
            f"a heartbeat of {text!r} is {why} (from {MIN_HEARTBEAT[1]} to {LONGEST[1]}, "
            "as [cluster] heartbeat)")
    return value


def _unquoted(text: str) -> str:
    """``text``'s string if it is one TOML string (``"2m"`` or ``'2m'``), else ``text``."""
    if text[:1] not in ("'", '"'):
        return text
    try:
        doc = tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return text  # (refused as it was written)
    return doc["v"] if list(doc) == ["v"] and isinstance(doc["v"], str) else text


PLOT_EXTRA = "pip install 'polybus[plot]'"  # (the extra that brings matplotlib)


def plot_extra_missing() -> str | None:
    """Why matplotlib does not import (its ImportError's words), or None if it does."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def check_plot_extra() -> None:
    """UsageError unless matplotlib imports: --plot draws only after everything ran
    (every combination of a sweep, every cell of a benchmark), and a missing extra ended
    a whole sweep in a traceback there, or a benchmark in \"no plot\"."""
    why = plot_extra_missing()
    if why is not None:
        raise UsageError(f"--plot needs matplotlib, which did not import ({why}): "
                         f"{PLOT_EXTRA}, or leave out --plot")


def check_plot(path: str) -> None:
    """--plot FILE: matplotlib imports, FILE's directory exists and is writable, and its
    extension is a format matplotlib writes (a plot is drawn after everything ran: an
    unknown extension ended a whole sweep in a traceback there, and a mistyped directory
    was made)."""
    check_plot_extra()
    check_writable(path, "--plot")
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lstrip(".").lower()
    if suffix not in kinds:
        raise UsageError(f"--plot {path}: not a format it can write; give a file ending "
                         f"in one of {', '.join('.' + k for k in sorted(kinds))}")
