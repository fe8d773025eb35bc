"""docs/protocol.md against a worker started by hand (README, "Start the parts by
hand"), from a client that imports nothing of polybus (foreign_client.py): the
handshake and its refusals, calls in flight matched by id, a remote exception, malformed
input dropped as section 5 says while another client is served on, and the control
messages a client sends (Ping, Revoke, Steal, Cancel, a lower frame limit).
test_protocol_by_hand.py (tests/unit) has the frame layout, arrays, bytes and batches.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from integration.conftest import Procs, read_line, start_registry
from integration.foreign_client import Conn, Ext, Refused, exact, frame, proof

SERVER = '''\
import time
from pathlib import Path


def add(a, b):
    return a + b


def fail(text):
    raise ValueError(text)


def echo(x):
    return x


def arange(n):
    return list(range(n))


def hold(path, tag=None):
    """Runs until the file ``path`` exists (the test creates it), at most 30 s."""
    end = time.monotonic() + 30
    while not Path(path).exists() and time.monotonic() < end:
        time.sleep(0.005)
    return tag
'''

TOKEN = b"a-token-of-our-own-" + b"7" * 24
enc = msgspec.msgpack.encode


class Replica:
    def __init__(self, address: tuple[str, int], tmp: Path) -> None:
        self.address, self.tmp, self.n = address, tmp, 0

    def gate(self) -> Path:
        """A file for `hold` to wait for, not made yet."""
        self.n += 1
        return self.tmp / f"gate-{self.n}"

    def conn(self, limit: int = 0) -> Conn:
        return Conn(self.address, TOKEN, limit)


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replica]:
    tmp = tmp_path_factory.mktemp("foreign")
    (tmp / "server.py").write_text(SERVER)
    token_file = tmp / "token"
    token_file.write_bytes(TOKEN + b"\n")  # (stripped: the key is the bytes before it)
    token_file.chmod(0o600)
    procs = Procs()
    try:
        env = {"POLYBUS_TOKEN": TOKEN.decode()}
        registry, _ = start_registry(procs, env)
        w = procs.start("worker", "--registry", registry, "--module", tmp / "server.py",
                        "--name", "server-0", "--token-file", token_file)
        assert w.stderr is not None
        m = read_line(w.stderr, r"serving .* at tcp://([\d.]+):(\d+)")
        yield Replica((m.group(1), int(m.group(2))), tmp)
    finally:
        procs.close()


def test_the_handshake_accepts_the_token_and_refuses_the_rest(replica: Replica) -> None:
    with replica.conn() as c:
        assert c.version == 1 and c.limit_s == 1 << 30  # the default max_frame, 1 GiB

    def answer(make: Any) -> tuple[bytes, bytes]:
        """The server's 33-byte answer to ``make(hello)``, and what came after it."""
        with socket.create_connection(replica.address, timeout=10) as s:
            s.sendall(make(exact(s, 40)))
            got = exact(s, 33)
            rest = s.recv(100)  # b"": the server closed the connection
        return got, rest

    zeros = bytes(32)
    assert answer(lambda h: proof(h, b"not the token")[0]) == (b"\x02" + zeros, b"")
    assert answer(lambda h: proof(h, TOKEN + b"\n")[0]) == (b"\x02" + zeros, b"")
    assert answer(lambda h: proof(h, TOKEN, version=2)[0]) == (b"\x01" + zeros, b"")
    assert answer(lambda h: proof(h, TOKEN, magic=b"XBUS")[0]) == (b"\x03" + zeros, b"")
    assert answer(lambda h: b"GET / HTTP/1.0\r\n\r\n") == (b"\x03" + zeros, b"")
    with pytest.raises(Refused) as refused:
        Conn(replica.address, b"not the token")
    assert refused.value.status == 2


def test_calls_in_flight_are_answered_by_id(replica: Replica) -> None:
    gate = replica.gate()
    with replica.conn() as c:
        c.send([1, 100, "hold", [str(gate)], {"tag": "held"}])
        assert until_running(c) == [11, 1, 0, 1]  # Pong(req, queued, running)
        c.send([1, 50, "add", [1, 2]])                    # prio 0
        c.send([1, 75, "add", ["a", "b"], None, 5.0])      # prio 5: served first
        c.send([10, 9])  # Ping(req=9), answered while `hold` runs
        assert c.get() == [11, 9, 2, 1]
        gate.touch()
        order = [c.get() for _ in range(3)]
        assert order == [[2, 100, "held"], [2, 75, "ab"], [2, 50, 3]]


def test_a_remote_exception_is_a_fail_with_type_text_and_where(replica: Replica) -> None:
    with replica.conn() as c:
        c.send([1, 1, "fail", ["no such part: 7"]])
        tag, cid, kind, type_, message, tb = c.get()
        assert (tag, cid, kind, type_, message) == (
            3, 1, "exception", "ValueError", "no such part: 7")
        assert not tb.startswith("Traceback") and "server.py\", line 10, in fail" in tb
        assert tb.rstrip().endswith("ValueError: no such part: 7")
        c.send([1, 2, "nope", []])
        assert c.get()[:4] == [3, 2, "no-interface", "LookupError"]
        c.send([1, 3, "add", [1, 2], None, float("nan")])
        assert c.get()[:3] == [3, 3, "bad-call"]
        c.send([1, 4, "echo", [[1]], None, 0.0, 0.0, [3]])  # `inside` names no argument
        assert c.get()[:4] == [3, 4, "bad-call", "LookupError"]
        c.send([1, 5, "add", [40, 2]])  # the connection serves on
        assert c.get() == [2, 5, 42]


def until_running(c: Conn) -> list[Any]:
    """Ping (req 1) until the replica's `Pong` says a call runs; that `Pong`."""
    deadline = time.monotonic() + 20
    while True:
        c.send([10, 1])
        pong = c.get()
        assert pong[:2] == [11, 1], pong
        if pong[3] or time.monotonic() > deadline:
            return pong  # type: ignore[no-any-return]


def stats(c: Conn) -> list[Any]:
    """Stats (a StatsRequest of req 2) once the replica runs nothing and queues nothing."""
    deadline = time.monotonic() + 20
    while True:
        c.send([8, 2])
        got = c.get()
        assert got[0] == 9 and got[8] == 2, got
        if got[5:7] == [0, 0] or time.monotonic() > deadline:
            return got  # type: ignore[no-any-return]


def _h(msg: Any) -> bytes:
    return enc(msg)


def _body(header: bytes, nbufs: int = 0, flags: int = 0) -> bytes:
    return struct.pack("<HHI", nbufs, flags, len(header)) + header


def _len(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def _ext_call(code: int, data: bytes) -> bytes:
    return _h([1, 1, "echo", [Ext(code, data)]])


MALFORMED = {
    "a length over max_frame": (struct.pack("<I", 0xFFFFFFFF), "over the limit"),
    "a length under 8": (_len(b"\0" * 4), "shorter than a frame header"),
    "4097 buffers": (_len(struct.pack("<HHI", 4097, 0, 0)), "at most 4096"),
    "a header_len past the end": (_len(struct.pack("<HHI", 0, 0, 99) + _h([10])),
                                  "lengths disagree"),
    "bytes after the header": (_len(_body(_h([10])) + b"xx"), "lengths disagree"),
    "an unknown tag": (_len(_body(_h([99, 1]))), "99"),
    "a header that is not an array": (_len(_body(_h(5))), "array"),
    "broken msgpack": (_len(_body(b"\xc1")), "malformed"),
    "a field of the wrong type": (_len(_body(_h([1, 1, 5, []]))), "str"),
    "an unknown ext": (_len(_body(_ext_call(9, b"x"))), "unknown extension type 9"),
    "a buffer index out of range": (_len(_body(_ext_call(2, _h(3)))), "buffer 3"),
    "a shape that does not fit": (frame(None, (b"x" * 16,), header=_ext_call(
        1, _h(["<f8", [3], 0]))), "shape"),
    "pickle, not enabled": (_len(_body(_ext_call(3, b"\x80\x05N."))), "pickle"),
    "a reference of no kind": (_len(_body(_ext_call(4, _h(["zz", "k"])))), "'zz'"),
    "a Register": (_len(_body(_h([20, ["n", "m", "tcp://127.0.0.1:1", []]]))),
                   "not a registry"),
    "frame flags over TCP": (_len(_body(_h([10]), flags=1)), "flags 1"),
}


def test_malformed_input_drops_that_connection_and_serves_the_others(
        replica: Replica) -> None:
    with replica.conn() as good:
        for i, (what, (data, said)) in enumerate(MALFORMED.items()):
            with replica.conn() as bad:
                bad.sock.sendall(data)
                goodbye, closed = bad.get(), bad.get()
                assert goodbye[0] == 26 and said in goodbye[1], (what, goodbye)
                assert closed[0] == "closed", (what, closed)
            good.send([1, i, "add", [i, 1]])
            assert good.get() == [2, i, i + 1], what


def test_revoke_steal_and_cancel_drop_calls_not_started(replica: Replica) -> None:
    gate = replica.gate()
    with replica.conn() as c:
        c.send([1, 1, "hold", [str(gate)], {"tag": 1}])
        until_running(c)
        for i in range(2, 8):
            c.send([1, i, "add", [i, 0]])
        c.send([29, [1, 2], 5])       # Revoke: 1 runs (left), 2 waits (dropped)
        assert c.get() == [7, [2], 5]
        c.send([6, 2, 6])             # Steal 2: from the back of the queue
        assert c.get() == [7, [7, 6], 6]
        c.send([5, [3]])              # Cancel: dropped, not answered
        c.send([10, 8])
        assert c.get() == [11, 8, 2, 1]  # (4 and 5 left waiting, 1 running)
        gate.touch()
        assert c.answers(3) == {1: [2, 1, 1], 4: [2, 4, 4], 5: [2, 5, 5]}
        c.send([1, 9, "add", [9, 0]])  # nothing else of 2, 3, 6, 7 comes before it
        assert c.get() == [2, 9, 9]


def test_a_lower_frame_limit_binds_both_sides(replica: Replica) -> None:
    with replica.conn(limit=4096) as c:
        c.send([1, 1, "arange", [2000]])  # an answer over 4096 bytes: that call fails
        fail = c.get()
        assert fail[:4] == [3, 1, "exception", "MessageTooLarge"]
        c.send([1, 2, "fail", ["y" * 3000]])  # a failure over it: its texts cut to fit
        fail = c.get()
        assert fail[:4] == [3, 2, "exception", "ValueError"]
        assert fail[4].endswith("the failure did not fit max_frame)")
        c.send([1, 3, "echo", ["z" * 5000]])  # a call over it: the peer is dropped
        goodbye = c.get()
        assert goodbye[0] == 26 and "over the limit of 4096 bytes" in goodbye[1]


def test_goodbye_ends_the_connection(replica: Replica) -> None:
    gate = replica.gate()
    with replica.conn() as other:
        before = stats(other)[2]  # the calls the replica has run
        with replica.conn() as c:
            c.send([1, 1, "hold", [str(gate)]])
            until_running(c)
            c.send([1, 2, "add", [1, 1]])
            c.send([26, "done"])
            assert c.get()[0] == "closed"  # no answer, no Goodbye back
        gate.touch()
        # the running call ran to its end; the waiting one was dropped, never run
        assert stats(other)[2] == before + 1


def test_a_kept_value_is_fetched_and_an_unknown_one_is_not(replica: Replica) -> None:
    with replica.conn() as c:
        c.send([28, 1, "p1", "c1"])  # Keep(id, pkey, key): before the call it names
        c.send([1, 1, "add", [40, 2]])
        assert c.get() == [2, 1, ("ref", "fwd", [])]  # kept there, not sent
        c.send([15, "p1", 3])
        assert c.get() == [16, 3, True, 42]
        c.send([15, "never-kept", 4])
        assert c.get() == [16, 4, False, None]
