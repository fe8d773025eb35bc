"""How a local worker ended, said with its loss. The quick look on the client's reactor
path waits 50 ms for the worker to be reaped (its connections close a moment before it
exits); on a loaded machine that moment was longer, and the loss was said as "closed
the connection" alone (seen in a whole-suite run beside two others: serve's "was
killed by signal 9" missing). The local engine now gives its word later too, waited for
on a thread of its own (client/lossline.py), as the mpi and Ray engines do."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polybus.engines.local import LocalEngine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LocalEngine]:
    e: Any = LocalEngine.__new__(LocalEngine)  # (no cluster: its procs only)
    e.procs = []
    yield e
    for _, proc, _ in e.procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_worker_reaped_after_the_quick_look_is_said_by_the_later_word(
        engine: LocalEngine, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.4)"])
    engine.procs.append(("server-0", proc, tmp_path / "log"))
    assert engine.how_ended("server-0") is None  # (still running: the quick look gives up)
    later = engine.how_ended_later("server-0")  # (waits for it, within its bound)
    assert later == "exited with status 0", later


def test_the_later_word_is_none_for_a_worker_still_running_past_its_bound(
        engine: LocalEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import polybus.engines.local as local

    monkeypatch.setattr(local, "ENDED_LATER_S", 0.2)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    engine.procs.append(("server-0", proc, tmp_path / "log"))
    assert engine.how_ended_later("server-0") is None
    assert engine.how_ended_later("nobody") is None
