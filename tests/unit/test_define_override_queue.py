"""A define table made only by --set fills in the module's other public functions; what a
replica takes as a whole (the queue's bound, a full queue's overflow) still comes from
the entries the override named.

A replica's queue is the largest ``queue`` of its module's defines (worker/main.py,
options_for). When the filled-in entries had the default queue of 1000, ``--set
modules.server.define.f.queue=10`` on a module whose file has no define table bounded
nothing (and ``check`` warned about define.g, which nobody wrote).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import load
from polybus.testing.apps import ONE_CALL_SERVER, write_one_call_app
from polybus.worker.main import options_for


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_one_call_app(tmp_path, server=ONE_CALL_SERVER + "\n\ndef g(x):\n    return x\n")


def test_a_queue_set_on_the_one_overridden_define_still_bounds_the_replica(app: Path) -> None:
    spec = load(app, ("modules.server.define.f.queue=10",)).modules["server"]
    assert sorted(spec.define) == ["f", "g"]  # (a92787b: the module serves g too)
    assert options_for(spec, None, 1 << 20).queue == 10


def test_a_reject_overflow_set_on_the_one_overridden_define_holds(app: Path) -> None:
    spec = load(app, ("modules.server.define.f.overflow=\"reject\"",)).modules["server"]
    assert spec.define["g"].overflow == "reject"
    assert options_for(spec, None, 1 << 20).overflow == "reject"
