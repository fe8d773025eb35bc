"""``balance = "least"``: each call goes to the replica with the fewest of the client's
calls there, so calls made while one replica runs a long call all go to the other;
a rotation (the default) sends every other one behind the long call (so the program
here, which waits for each, would wait for the long call's end)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus

SERVER = '''\
import os
import time
from pathlib import Path


def who(i, until=""):
    """[i, the pid that ran it]; with ``until``, not before that file exists."""
    while until and not Path(until).exists():
        time.sleep(0.01)
    return [i, os.getpid()]
'''
CLIENT = '''\
from pathlib import Path

from polybus import use, wait

who = use("who")


def main(flag, one_at_a_time=True):
    long = who(0, flag)  # runs until the file exists
    if one_at_a_time:  # each waited for, while the long call runs
        short = [wait(who(i)) for i in range(1, 9)]
    else:  # (a rotation puts every other one behind the long call: waited after it)
        short = [who(i) for i in range(1, 9)]
    Path(flag).write_text("go")
    return [wait(long)[1], [pid for _, pid in wait(short)]]
'''
APP = '''\
[modules.server]
source = "server.py"
replication = 2
define.who = {{ pool = 1 }}

[modules.client]
source = "client.py"
entrypoint = "main"
args = [{flag!r}, {waited}]
use.who = {{ callstyle = "async"{balance} }}

[bind]
"client.who" = "server.who"
'''


def _run(tmp_path: Path, balance: str, waited: bool = True) -> tuple[int, list[int]]:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    flag = tmp_path / f"go-{balance or 'default'}"
    extra = f', balance = "{balance}"' if balance else ""
    (tmp_path / "app.toml").write_text(APP.format(flag=str(flag), balance=extra,
                                                      waited=str(waited).lower()))
    long_pid, short = polybus.run(tmp_path / "app.toml").result
    return long_pid, short


def test_least_sends_nothing_behind_a_long_call(tmp_path: Path) -> None:
    long_pid, short = _run(tmp_path, "least")
    assert long_pid not in short and len(set(short)) == 1, (long_pid, short)


@pytest.mark.parametrize("balance", ["", "none"])
def test_a_rotation_sends_every_other_call_behind_it(tmp_path: Path, balance: str) -> None:
    long_pid, short = _run(tmp_path, balance, waited=False)
    assert short.count(long_pid) == 4 and len(set(short)) == 2, (long_pid, short)
