"""A BusyError for a call of an interface that never asked for "reject" says which
define's queue bound and overflow refused it, and `polybus run`'s error line names the
error's type.

A new user's ``--set modules.sv.define.work.queue=1 --set
modules.sv.define.work.overflow=reject`` made a call of stage1 fail with ``polybus run:
error: sv-1: queue of 1 call is full``: not said to be a BusyError, and nothing pointed
at define.work, since a replica has one queue for all its interfaces (worker/main.py,
options_for).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli import cmd_check
from polybus.cli.main import main
from polybus.config import load
from polybus.errors import (
    BusyError,
    CallTimeoutError,
    CancelledError,
    ConnectionLostError,
    NoReplicaError,
    RemoteException,
)
from polybus.testing.apps import write_bound_app
from polybus.worker.main import options_for

SERVER = "".join(f"def {n}(x):\n    return x\n\n\n" for n in ("stage1", "stage2", "work"))
CLIENT = "from polybus import use\n\nwork = use('work')\n\n\ndef main():\n    return work(1)\n"
SV = "modules.server.define"


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("work",),
                           server_keys="replication = 1")


def full(app: Path, iface: str, *sets: str) -> str:
    return options_for(load(app, sets).modules["server"], None, 1 << 20).full_text(
        "server-0", iface)


def test_a_call_of_another_interface_is_told_which_define_rejects(app: Path) -> None:
    sets = (f"{SV}.work.queue=1", f"{SV}.work.overflow=reject")
    assert full(app, "stage1", *sets) == (
        "server-0: queue of 1 call is full; the replica has one queue for all its "
        "interfaces, and a call of stage1 is refused too: the queue takes its bound "
        "(queue = 1) and overflow = \"reject\" from define.work")
    assert full(app, "work", *sets) == "server-0: queue of 1 call is full"
    assert full(app, "work@http", *sets) == "server-0: queue of 1 call is full"


def test_the_bound_and_the_reject_may_come_from_different_defines(app: Path) -> None:
    sets = (f"{SV}.stage1.queue=5", f"{SV}.work.queue=2", f"{SV}.work.overflow=reject")
    assert full(app, "stage2", *sets) == (
        "server-0: queue of 5 calls is full; the replica has one queue for all its "
        "interfaces, and a call of stage2 is refused too: the queue takes its bound "
        "(queue = 5) from define.stage1 and overflow = \"reject\" from define.work")


@pytest.mark.parametrize(("error", "line"), [
    (BusyError("server-0: queue of 1 calls is full"),
     "polybus check: error: BusyError: server-0: queue of 1 calls is full"),
    (CallTimeoutError("no answer from server-0 within 1s"),
     "polybus check: error: CallTimeoutError: no answer from server-0 within 1s"),
    (RemoteException("ValueError", "bad", ""),  # (its text has the remote type)
     "polybus check: error: ValueError: bad (remote)"),
    # a call lost with every replica: a TransportError, not a RemoteError, and it was
    # said without its name ("error: the call adjust('shared', 1) was lost: ...")
    (ConnectionLostError("the call f(1) was lost: every replica of f is gone"),
     "polybus check: error: ConnectionLostError: the call f(1) was lost: every replica "
     "of f is gone"),
    # neither a RemoteError: both were said by their message alone
    (NoReplicaError('no replica serves "f"'),
     'polybus check: error: NoReplicaError: no replica serves "f"'),
    (CancelledError("the call f(1) was cancelled"),
     "polybus check: error: CancelledError: the call f(1) was cancelled"),
])
def test_the_error_line_names_a_call_failure_s_type(
        error: Exception, line: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def failing(args: object) -> int:
        raise error
    monkeypatch.setattr(cmd_check, "main", failing)
    assert main(["check", "app.toml"]) == 2
    assert capsys.readouterr().err == line + "\n"
