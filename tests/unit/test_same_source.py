"""A replica registered under a module's key from another file is left out (dialing.same_source)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from polybus.client.dialing import same_source
from polybus.errors import NoReplicaError
from polybus.usercode import source_digest
from polybus.wire.messages import Replica


def _replica(name: str, source: str) -> Replica:
    return Replica(name, "server", "tcp://127.0.0.1:1", ["f"], source=source)


def test_replicas_of_another_file_are_left_out_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    mine = tmp_path / "server.py"
    mine.write_text("def f(x):\n    return x\n")
    other = tmp_path / "other.py"
    other.write_text("def f(x):\n    return -x\n")
    same, old, stray = (_replica("s-0", source_digest(mine)), _replica("s-1", ""),
                        _replica("x", source_digest(other)))
    said: set[str] = set()
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        assert same_source("server", mine, "127.0.0.1:9", [same, old, stray], said) == [same, old]
        assert same_source("server", mine, "127.0.0.1:9", [same, stray], said) == [same]
    (record,) = caplog.records
    assert "left out x, registered at 127.0.0.1:9 under the same key" in record.getMessage()
    # every one of another file: an error, not a run on none
    with pytest.raises(NoReplicaError, match=r"every replica of module 'server' registered "
                       r"at 127.0.0.1:9 \(x\) runs another file than"):
        same_source("server", mine, "127.0.0.1:9", [stray], said)


def test_a_worker_registers_the_digest_of_the_file_it_read(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_bytes(b"def f():\n    return 1\n")
    b = tmp_path / "b.py"
    b.write_bytes(b"def f():\r\n    return 1\r\n")  # (the same code, other bytes)
    assert source_digest(a) == source_digest(a) != source_digest(b)
    assert len(source_digest(a)) == 16


def test_a_replica_of_this_file_that_serves_less_is_not_said_to_run_another(
        tmp_path: Path) -> None:
    """A worker of this very file started with --module serves the defs of its file
    alone, where the configuration serves what [bind] binds too (a function the file
    imports): the run said "a worker of another file registered under the same module
    key", which it is not (those are left out before, by their digest)."""
    from types import SimpleNamespace

    from polybus.client.dialing import check_serves
    from polybus.config.model import Binding

    link = SimpleNamespace(name="server-0")
    with pytest.raises(NoReplicaError) as info:
        check_serves(Binding("client", "square", "server", "square"), [link],  # type: ignore[list-item]
                     {"server-0": ["total"]}, "127.0.0.1:9", tmp_path / "app.toml")
    said = str(info.value)
    assert said.startswith("replica server-0 of module 'server' (registered at 127.0.0.1:9) "
                           "does not serve 'square'; it serves total: "), said
    assert "a worker of another file registered" not in said
    assert ("a worker started with --module serves the functions its file defines (each "
            "def, not a function it imports)") in said
    assert f"polybus worker --config {tmp_path / 'app.toml'} --as server" in said
