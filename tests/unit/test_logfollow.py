"""The follower of the local engine's worker logs (engines/logfollow.py), on files this
test writes itself: whole lines, prefixed; the banner left out, polybus's warnings and
errors kept; a line cut between two reads goes out once, whole; a long log's read part
freed, its lines all forwarded and its tail kept."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from polybus.engines import logfollow
from polybus.engines.local import _tail
from polybus.engines.logfollow import LogFollower


def test_lines_are_prefixed_whole_and_the_banner_alone_is_dropped(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"polybus worker server-0: serving f, g at tcp://127.0.0.1:1\nhel")
    b.write_bytes(b"polybus worker server-1: lost the registry at 127.0.0.1:2; serving on\n")
    out = io.StringIO()
    f = LogFollower([("server-0", a), ("server-1", b)], out)  # (not started: by hand)
    f.forward()
    assert out.getvalue() == ("(server-1) polybus worker server-1: lost the registry at "
                              "127.0.0.1:2; serving on\n")
    with a.open("ab") as w:
        w.write(b"lo\r\nwarning: x\npolybus worker: error: bad\n\xff tail")
    f.forward()
    assert out.getvalue().splitlines()[1:] == [
        "(server-0) hello", "(server-0) warning: x", "(server-0) polybus worker: error: bad"]
    f.close()  # the last, unfinished line too
    assert out.getvalue().splitlines()[-1] == "(server-0) \ufffd tail"


def test_another_workers_banner_line_is_not_taken_for_this_ones(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    a.write_text("polybus worker server-9: serving f at tcp://x\n")
    out = io.StringIO()
    f = LogFollower([("server-0", a)], out)
    f.close()
    assert out.getvalue() == "(server-0) polybus worker server-9: serving f at tcp://x\n"


def test_a_closed_stream_or_a_missing_log_stops_nothing(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    a.write_text("one\n")
    out = io.StringIO()
    f = LogFollower([("server-0", a), ("server-1", tmp_path / "gone.log")], out).start()
    out.close()
    f.close()  # (no exception: the run's end is not spoiled by its stderr)


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def _can_punch(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        return logfollow.punch(fd, 0)
    finally:
        os.close(fd)


def test_a_long_log_keeps_its_lines_but_frees_the_blocks_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A chatty server: 12 MiB of lines, appended (as the worker does) while followed.
    monkeypatch.setattr(logfollow, "PUNCH_EVERY", 1 << 20)
    a = tmp_path / "a.log"
    a.write_bytes(b"")
    if not _can_punch(a):
        pytest.skip("no fallocate here")
    line = b"x" * 1000
    out = io.StringIO()
    f = LogFollower([("server-0", a)], out)
    with a.open("ab") as w:
        for i in range(12 * 1024):
            w.write(b"%d %s\n" % (i, line))
            if i % 512 == 0:
                w.flush()
                f.forward()
    size = a.stat().st_size
    f.close()
    got = out.getvalue().splitlines()
    assert len(got) == 12 * 1024  # every line forwarded, in order, whole
    assert [int(g.split()[1]) for g in got] == list(range(12 * 1024))
    assert all(g.endswith(line.decode()) for g in got)
    assert size > 12_000_000 and a.stat().st_size == size  # the length is kept
    assert _allocated(a) < 4 << 20  # what was read is freed (but the last KEEP bytes)
    with open(a, "rb") as r:  # the tail the engine's diagnostics read is still there
        r.seek(size - logfollow.KEEP)
        assert r.read().endswith(b"%d %s\n" % (12 * 1024 - 1, line))
    assert _tail(a, 2).splitlines()[-1] == f"{12 * 1024 - 1} {line.decode()}"


def test_without_an_output_the_lines_are_read_and_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logfollow, "PUNCH_EVERY", 1 << 20)
    a = tmp_path / "a.log"
    a.write_bytes(b"y" * 999 + b"\n")
    f = LogFollower([("server-0", a)], None)
    with a.open("ab") as w:
        w.write((b"z" * 999 + b"\n") * (5 << 10))
    f.forward()
    f.close()
    assert a.stat().st_size == 1000 * (1 + (5 << 10))
    if _can_punch(a):  # read, dropped, and all but its tail freed
        assert _allocated(a) < 2 << 20
    assert _tail(a, 1) == "z" * 999
