"""What `polybus run` says of a worker that ended while starting (engines/local.py)."""

from __future__ import annotations

from pathlib import Path

from polybus.engines.local import _start_failure


def test_a_worker_killed_while_starting_says_the_signal_and_that_it_printed_nothing(
        tmp_path: Path) -> None:
    # A new user's kill -9 of a starting worker said "exited with status -9 while
    # starting:" and nothing after the colon.
    log = tmp_path / "w.log"
    log.write_text("")
    assert _start_failure("st1-0", -9, log) == (
        "worker st1-0 was killed by signal 9 (SIGKILL) while starting (it printed nothing)")
    assert _start_failure("st1-0", -9, tmp_path / "none.log") == (
        "worker st1-0 was killed by signal 9 (SIGKILL) while starting (it printed nothing)")


def test_a_worker_that_exited_while_starting_shows_its_output_or_its_error(
        tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text("Traceback (most recent call last):\nMemoryError\n")
    said = _start_failure("s-0", 1, log)
    assert said.startswith("worker s-0 exited with status 1 while starting:\n")
    assert said.endswith("MemoryError")
    log.write_text("noise\npolybus worker: error: module source /x/y.py does not exist\n")
    assert _start_failure("s-0", 2, log) == (
        "worker s-0 could not start: module source /x/y.py does not exist")
