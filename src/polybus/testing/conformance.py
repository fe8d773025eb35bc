"""What every transport must do, as one function: ``check_transport(scheme, directory)``.

It listens on ``scheme`` (``tcp``, ``ipc``, ``shm``, ``inproc``; socket files go in
``directory``), runs an echo peer in a thread and checks, over one authenticated
connection:

- messages of mixed sizes (empty to several MiB, arrays of several dtypes and shapes,
  bytes in the header and out of band) come back equal, one at a time and many per
  write, including more in flight than the socket buffers hold;
- bytes of every size, sent as a call's argument (out of band from 64 KiB, as the
  client sends them) and answered as a Result's value, come back as equal ``bytes``;
- a large array (``large`` bytes) makes the trip intact;
- close: the far side sees ConnectionLostError on receive, a send on a closed channel
  raises ConnectionLostError, and a closed peer is seen by the other side;
- ``ipc``/``shm`` socket files are 0600; ``shm`` really carried the large buffers in
  shared memory, and no segment stays mapped or open in this process once the arrays
  and channels are gone (segments are memfds, so nothing is ever named in /dev/shm);
- ``inproc`` makes no file, and its connections are unnamed Unix sockets (nothing
  another process could dial); its name is this process's alone, taken while it
  listens (a second listener is refused) and free once it is closed (a dialler is then
  told no listener has that name).
"""

from __future__ import annotations

import gc
import os
import socket
import threading
from pathlib import Path
from typing import Any

import numpy as np

from polybus.errors import ConnectionLostError, TransportError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, authenticate, connect, listen
from polybus.wire.codec import OOB_BYTES, Codec, OutOfBand
from polybus.wire.messages import Call, Message, Result

__all__ = ["SIZES", "check_transport", "memfd_mappings"]

TOKEN = b"conformance-token-0123456789abcdef"
SIZES = [0, 1, 100, 4096, 65535, 256 * 1024 - 1, 256 * 1024, 300_000, 1 << 20, 5 << 20]


def memfd_mappings() -> int:
    """Shared segments of the shm transport this process has mapped or open now."""
    maps = Path("/proc/self/maps").read_text().count("polybus-shm")
    fds = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            fds += "polybus-shm" in os.readlink(fd)
        except OSError:
            pass
    return maps + fds


def _payloads(rng: np.random.Generator) -> list[Any]:
    out: list[Any] = []
    for i, n in enumerate(SIZES):
        dtype = [np.uint8, np.float64, np.int32, np.complex128][i % 4]
        count = max(n // np.dtype(dtype).itemsize, 0)
        arr: np.ndarray[Any, Any] = rng.integers(0, 255, count).astype(dtype)
        out.append(arr.reshape(-1, 2) if count % 2 == 0 and count else arr)
        out.append(bytes(rng.integers(0, 255, min(n, 100_000), dtype=np.uint8)))
    out.append(np.arange(12, dtype=np.int16).reshape(3, 4).T)  # not contiguous
    out.append(np.float32(2.5))
    out.append({"nested": [np.ones(70_000), "text", None]})
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and bool(np.array_equal(a, b)))
    if isinstance(a, np.generic):
        return bool(a.item() == b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _echo(ch: Channel, stop: threading.Event) -> None:
    """Answer every Call with its arguments until the peer goes."""
    try:
        while not stop.is_set():
            for msg in ch.receive():
                if isinstance(msg, Call):
                    # "value": the argument itself is the answer (a top-level value).
                    answer = msg.args[0] if msg.iface == "value" else msg.args
                    ch.send(Result(msg.id, answer), on_blocked=lambda: None)
    except ConnectionLostError:
        pass
    finally:
        ch.close()


def _collect(ch: Channel, want: int, got: dict[int, Any]) -> None:
    while len(got) < want:
        for msg in ch.receive():
            assert isinstance(msg, Result), msg
            got[msg.id] = msg.value


def _check_inproc_name(real: Address, directory: Path) -> None:
    """A live inproc name: nothing in the filesystem, and taken."""
    assert not os.path.lexists(real.path), "inproc made a file"
    assert not any(directory.iterdir()), "inproc made a file"
    try:
        second, _ = listen(real)
    except TransportError:
        pass
    else:
        second.close()
        raise AssertionError(f"a second listener took {real}, a name in use")


def _check_inproc_freed(real: Address) -> None:
    """A closed inproc listener's name: unknown to a dialler, free to listen on again."""
    try:
        connect(real, TOKEN, Codec(), timeout=1.0).close()
    except TransportError as exc:
        assert "no listener" in str(exc), exc
    else:
        raise AssertionError(f"{real} was dialled after its listener closed")
    again, _ = listen(real)
    again.close()


def check_transport(scheme: str, directory: Path, *, large: int = 64 << 20,
                    seed: int = 1) -> None:
    """Raise AssertionError (or a transport error) if ``scheme`` breaks the contract."""
    where = Address.parse("tcp://127.0.0.1:0" if scheme == "tcp"
                          else f"{scheme}://{directory / f'conf.{scheme}'}")
    listener, real = listen(where)
    if scheme in ("ipc", "shm"):
        assert os.stat(real.path).st_mode & 0o777 == 0o600, "socket file must be 0600"
    if scheme == "inproc":
        _check_inproc_name(real, directory)
    served: list[Channel] = []
    stop = threading.Event()

    def serve() -> None:
        sock, peer = listener.accept()
        ch = authenticate(sock, peer, TOKEN, Codec(), shm=scheme == "shm")
        served.append(ch)
        _echo(ch, stop)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    client = connect(real, TOKEN, Codec())
    if scheme == "inproc":
        sock = client.sock
        assert sock.family == socket.AF_UNIX and sock.getsockname() in ("", b""), \
            f"an inproc connection is bound to {sock.getsockname()!r}"
    rng = np.random.default_rng(seed)
    try:
        payloads = _payloads(rng)
        got: dict[int, Any] = {}
        # one at a time
        for i, value in enumerate(payloads):
            client.send(Call(i, "echo", [value]))
            _collect(client, len(got) + 1, got)
            assert _same(got[i][0], value), f"message {i} changed on the way"
        # bytes as a top-level argument and answer, both ways out of band when large
        for n in [*SIZES, OOB_BYTES - 1, OOB_BYTES, 3 << 20]:
            data = rng.integers(0, 255, n, dtype=np.uint8).tobytes()
            client.send(Call(-2, "value", [OutOfBand(data) if n >= OOB_BYTES else data]))
            _collect(client, len(got) + 1, got)
            back = got.pop(-2)
            assert type(back) is bytes and back == data, f"{n} bytes changed on the way"
        # many per write, more in flight than the socket holds; read while blocked
        base = len(payloads)
        batch: list[Message] = [Call(base + i, "echo", [payloads[i % len(payloads)]])
                                for i in range(3 * len(payloads))]
        batch.append(Call(base + len(batch), "echo", [OutOfBand(b"\x05" * 300_000)]))

        def drain() -> None:
            for msg in client.receive(wait=False):
                assert isinstance(msg, Result)
                got[msg.id] = msg.value

        client.send_many(batch, on_blocked=drain)
        _collect(client, base + len(batch), got)
        for i in range(len(batch) - 1):
            assert _same(got[base + i][0], payloads[i % len(payloads)]), f"batched {i} changed"
        assert got[base + len(batch) - 1][0] == b"\x05" * 300_000
        # large
        big = rng.integers(0, 255, large, dtype=np.uint8)
        client.send(Call(-1, "echo", [big]), on_blocked=drain)
        _collect(client, len(got) + 1, got)
        assert _same(got[-1][0], big), "the large array changed on the way"
        got.clear()
        del big, payloads, batch
        if scheme == "shm":
            from polybus.transport.shm import ShmChannel

            assert isinstance(client, ShmChannel) and client.shm_bytes_sent >= large
        # close: the far side sees it; a closed channel refuses to send
        client.close()
        try:
            client.send(Call(0, "echo", []))
        except ConnectionLostError:
            pass
        else:
            raise AssertionError("send on a closed channel did not raise ConnectionLostError")
        server.join(10)
        assert not server.is_alive(), "the peer did not see the connection close"
        # and the other way round: a peer that closes is seen by the client
        again = threading.Thread(target=lambda: served.append(
            authenticate(*listener.accept(), TOKEN, Codec(), shm=scheme == "shm")), daemon=True)
        again.start()
        second = connect(real, TOKEN, Codec())
        again.join(10)
        served[-1].close()
        try:
            while True:
                second.receive()
        except ConnectionLostError:
            pass
        second.close()
    finally:
        stop.set()
        client.close()
        for ch in served:
            ch.close()
        listener.close()
        server.join(10)
    if scheme in ("ipc", "shm"):
        os.unlink(real.path)
    if scheme == "inproc":
        _check_inproc_freed(real)
    gc.collect()
    assert memfd_mappings() == 0, "shared segments left mapped or open"
