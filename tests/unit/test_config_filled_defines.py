"""A define table made only by --set fills in the module's other public functions
(sourcecheck.define_all); the checks blame only the defines written, in the file or
by an override, never those filled in.

A new user's ``--set modules.sv.define.work.overflow=reject --set
modules.sv.define.stage2.overflow=block`` on a module whose file has no define table was
warned about define.stage1, define.dot, ... (five interfaces nobody set), each said to
ask for "reject"; ``--set modules.sv.define.work.queue=1`` said the queue's bound was
"1000, the default, of define.stage1, ..."; and ``work.queue=1`` with ``work.overflow =
"reject"`` was said ok, though calls to every other interface are refused then too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import load
from polybus.config.workerside import applied, setting_key
from polybus.testing.apps import write_bound_app

SERVER = "".join(f"def {n}(x):\n    return x\n\n\n" for n in (
    "stage1", "stage2", "dot", "lookup", "work", "maybe_fail", "big"))
CLIENT = "from polybus import use\n\nwork = use('work')\n\n\ndef main():\n    return work(1)\n"
SV = "modules.server.define"


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("work",),
                           server_keys="replication = 1")


def notes(app: Path, *sets: str) -> list[tuple[str | None, str | None, str, str | None]]:
    return [(n.file, n.key, n.bare_message, n.hint) for n in load(app, sets).notes]


def test_reject_on_the_one_named_define_warns_for_the_interfaces_it_did_not_name(
        app: Path) -> None:
    assert notes(app, f"{SV}.work.queue=1", f"{SV}.work.overflow=reject") == [(
        "--set", f"{SV}.work.overflow",
        "overflow = \"reject\" applies to the whole queue of each replica of module 'server', "
        "which all its interfaces share: when it is full, calls to its interfaces that no "
        "define names (stage1, stage2, dot and 3 more) are refused too (BusyError)",
        "set overflow = \"reject\" on every interface of module 'server', or put work in a "
        "module of its own: another [modules.<key>] with the same source")]


def test_only_the_define_that_asked_for_reject_is_blamed(app: Path) -> None:
    assert notes(app, f"{SV}.work.overflow=reject", f"{SV}.stage2.overflow=block") == [(
        "--set", f"{SV}.work.overflow",
        "overflow = \"reject\" applies to the whole queue of each replica of module 'server', "
        "which all its interfaces share: when it is full, calls to stage2 are refused too "
        "(BusyError), though they ask for \"block\", and so are calls to the interfaces no "
        "define names (stage1, dot, lookup and 2 more)",
        "set overflow = \"reject\" on every interface of module 'server', or put work in a "
        "module of its own: another [modules.<key>] with the same source")]


def test_the_largest_queue_is_said_to_come_from_the_defines_written(app: Path) -> None:
    said = notes(app, f"{SV}.work.queue=1", f"{SV}.stage2.overflow=block")
    assert [(file, key) for file, key, _, _ in said] == [("--set", f"{SV}.work.queue")]
    assert "(1000, the default, of define.stage2), so" in said[0][2], said[0][2]


def test_reject_everywhere_it_is_written_says_nothing(app: Path) -> None:
    sets = [f"{SV}.{n}.overflow=reject" for n in (
        "stage1", "stage2", "dot", "lookup", "work", "maybe_fail", "big")]
    assert notes(app, *sets) == []


def test_a_run_on_hand_started_workers_names_only_the_keys_written(app: Path) -> None:
    # (polybus run --registry: a replica's setting that differs from the run's is said at
    # the define that gave the run its value, not at one filled from it)
    spec = load(app, [f"{SV}.work.overflow=reject"]).modules["server"]
    assert applied(spec, "server-0")["overflow"] == "reject"
    assert setting_key(spec, "overflow") == f"{SV}.work.overflow"


COUNTER = """\
import threading


class Counter:
    def __init__(self):
        self.n = 0
        self.lock = threading.Lock()

    def incr(self, by=1):
        with self.lock:
            self.n += by
            return self.n

    def get(self):
        return self.n


counter = Counter()
incr = counter.incr
get = counter.get
"""
COUNTER_CLIENT = ("from polybus import use\n\nincr = use('incr')\nget = use('get')\n\n\n"
                  "def main():\n    incr(2)\n    return get()\n")


@pytest.mark.parametrize("override", [f"{SV}.incr.pool=2", f"{SV}.incr={{pool = 2}}"])
def test_a_define_made_by_set_keeps_the_bound_methods_the_module_serves(
        tmp_path: Path, override: str) -> None:
    # A module serving a bound method (`get = counter.get`, an actor's state behind it),
    # with no define table: `--set modules.server.define.incr.pool=2` was refused,
    # "module 'server' does not serve 'get': a module with a define table serves only
    # the interfaces it lists (incr)", where the same --set on a module of defs
    # configured incr and left the rest served.
    app = write_bound_app(tmp_path, server=COUNTER, client=COUNTER_CLIENT,
                          names=("incr", "get"), server_keys="replication = 1")
    config = load(app, [override])
    define = config.modules["server"].define
    assert sorted(define) == ["get", "incr"]
    assert define["incr"].pool == 2
