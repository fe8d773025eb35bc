"""The follower of the local engine's worker logs (engines/logfollow.py), on files this
test writes itself: whole lines, prefixed; the banner left out, polybus's warnings and
errors kept; a line cut between two reads goes out once, whole."""

from __future__ import annotations

import io
from pathlib import Path

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
