"""Listening on a Unix socket (ipc://, shm://): the file is 0600 from its first moment,
and a path that cannot be bound is a TransportError naming the address."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from polybus.errors import TransportError
from polybus.transport.endpoints import Address, listen


@pytest.mark.parametrize("scheme", ["ipc", "shm"])
def test_the_socket_file_never_has_the_umasks_mode(
        scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a umask of 0, a socket file made by the bind alone is world-connectable
    until the chmod that follows it; it is 0600 from the bind on."""
    target = tmp_path / "w.sock"
    target.write_text("stale")  # a file left by an earlier run is replaced
    before_chmod: list[int] = []
    real_chmod = os.chmod

    def spy(path: object, mode: int, **kw: object) -> None:
        if str(path) == str(target):
            before_chmod.append(stat.S_IMODE(os.stat(target).st_mode))
        real_chmod(path, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "chmod", spy)
    old = os.umask(0)
    try:
        sock, _ = listen(Address.parse(f"{scheme}://{target}"))
    finally:
        os.umask(old)
    try:
        assert before_chmod == [0o600]  # already private when the bind made it
        assert stat.S_ISSOCK(os.stat(target).st_mode)
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    finally:
        sock.close()


def test_a_path_that_cannot_be_bound_is_a_transport_error(tmp_path: Path) -> None:
    where = f"ipc://{tmp_path}/missing/w.sock"
    with pytest.raises(TransportError, match=r"cannot listen on ipc://.*missing/w.sock"):
        listen(Address.parse(where))
