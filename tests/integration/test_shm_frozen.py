"""A large array the client holds read-only goes over shm read-only, and once.

An array that is read-only through and through arrives read-only. The same array object
(or a view of the same place in it) sent again goes by the process's shared segment for
its content (transport/shmseg.py):
a stateless client passing one frozen B with every call copies it once, whichever
replica each call goes to. Its content is hashed at each such send, so an array made
writable, changed and frozen again between two sends arrives as it is now.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from polybus.errors import ProtocolError
from polybus.testing.conformance import memfd_mappings
from polybus.transport import shmseg
from polybus.transport.shm import ShmChannel
from polybus.transport.shmshare import shelf
from polybus.wire.arrays import frozen, kept_copy, program_froze
from polybus.wire.messages import Batch, Call, Message, Result

from .test_shm_broadcast import _pairs

N = 200  # 320 KB: above the shm threshold, so it goes by segment


def _arg(ch: ShmChannel) -> Any:
    msgs: list[Message] = list(ch.receive())
    assert len(msgs) == 1 and isinstance(msgs[0], Call)
    return msgs[0].args[0]


def _frozen(rows: int = N, seed: int = 1) -> np.ndarray[Any, Any]:
    b = np.random.default_rng(seed).random((rows, N))
    b.flags.writeable = False
    return b


Pair = tuple[ShmChannel, ShmChannel]


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A client channel and a replica channel over shm, closed after the test, which
    leaves no shared segment mapped or open."""
    pairs = _pairs(1)
    try:
        yield pairs[0]
    finally:
        _close(pairs)
    assert memfd_mappings() == 0


def _close(pairs: list[tuple[ShmChannel, ShmChannel]]) -> None:
    for c, r in pairs:
        c.close()
        r.close()
    gc.collect()


def test_a_frozen_array_sent_again_is_copied_once_for_every_channel() -> None:
    pairs = _pairs(2)
    b = _frozen()
    copies = shelf().copies
    try:
        got = []
        for i in range(6):
            c, r = pairs[i % 2]
            c.send(Call(i, "f", [b]))
            got.append(_arg(r))
        # The first send went by its channel's own segment; the second was copied into
        # the shared one, and the four after it named that copy.
        assert shelf().copies == copies + 1
        for v in got:
            assert np.array_equal(v, b) and not v.flags.writeable
            with pytest.raises(ValueError):
                v[0, 0] = 1.0
        assert all(c._lent for c, _ in pairs)  # held while a receiver views it
        del v, got
        gc.collect()
        for c, r in pairs:  # a round trip carries the releases back
            r.send(Result(0, None))
            assert isinstance(next(iter(c.receive())), Result)
        assert not any(c._lent for c, _ in pairs)
        # A writable array is still copied at every send, and arrives writable.
        w = np.ones((N, N))
        c, r = pairs[0]
        for i in range(2):
            c.send(Call(10 + i, "f", [w]))
            v = _arg(r)
            assert v.flags.writeable and np.array_equal(v, w)
        assert shelf().copies == copies + 1
        del v
    finally:
        _close(pairs)
    assert memfd_mappings() == 0


def test_an_array_changed_between_two_sends_arrives_as_it_is_now(pair: Pair) -> None:
    c, r = pair
    b = _frozen(seed=2)
    for i in range(2):
        c.send(Call(i, "f", [b]))
        assert np.array_equal(_arg(r), b)
    b.flags.writeable = True
    b[0, 0] = 42.0
    b.flags.writeable = False
    c.send(Call(2, "f", [b]))
    now = _arg(r)
    assert now[0, 0] == 42.0 and np.array_equal(now, b)
    del now


def test_frozen_views_and_column_blocks_arrive_read_only_by_the_channels_segment(pair: Pair) -> None:
    c, r = pair
    a = _frozen(4 * N, seed=3)
    copies = shelf().copies
    for i in range(3):  # a fresh view each call (a block of rows): never "again"
        c.send(Call(i, "f", [a[N * i:N * (i + 1)]]))
        v = _arg(r)
        assert not v.flags.writeable and np.array_equal(v, a[N * i:N * (i + 1)])
    cols = a[:, :N // 2]  # not contiguous: gathered into the channel's segment
    for i in range(2):
        c.send(Call(5 + i, "f", [cols]))
        v = _arg(r)
        assert not v.flags.writeable and np.array_equal(v, cols)
    assert shelf().copies == copies  # none of them by a shared segment
    del v


def test_a_view_sliced_afresh_at_the_same_place_is_copied_once(pair: Pair) -> None:
    c, r = pair
    a = _frozen(4 * N, seed=7)
    copies = shelf().copies
    for i in range(4):  # ep's a[i:i+k], sliced for each of the tasks that use it
        c.send(Call(i, "f", [a[N:2 * N]]))
        v = _arg(r)
        assert not v.flags.writeable and np.array_equal(v, a[N:2 * N])
    assert shelf().copies == copies + 1  # the second send's; the first went as any
    c.send(Call(9, "f", [a[2 * N:3 * N]]))  # another place: not "again"
    assert np.array_equal(_arg(r), a[2 * N:3 * N])
    assert shelf().copies == copies + 1
    del v


def test_calls_held_and_written_together_in_a_batch_are_sent_as_calls_alone_are(
        pair: Pair) -> None:
    # (async-demand's backlog and calls held for a busy replica are written as one
    # Batch frame: which calls go so is a matter of timing, and must not change how
    # their arguments travel)
    c, r = pair
    a = _frozen(4 * N, seed=8)
    copies = shelf().copies
    c.send(Batch([Call(i, "f", [a[N:2 * N], a[:, :N // 2]]) for i in range(4)]))
    msgs: list[Message] = list(r.receive())
    assert len(msgs) == 1 and isinstance(msgs[0], Batch)
    for call in msgs[0].items:
        assert isinstance(call, Call)
        for v, want in zip(call.args, (a[N:2 * N], a[:, :N // 2]), strict=True):
            assert not v.flags.writeable and np.array_equal(v, want)
    # The row block went by the channel's own segment once, then by one shared copy.
    assert shelf().copies == copies + 1
    del msgs, call, v


def test_with_no_shared_segment_to_be_had_it_goes_by_the_channels_own_still_read_only(
        pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    c, r = pair
    b = _frozen(seed=6)
    monkeypatch.setattr(shelf(), "max_segments", 0)
    for i in range(3):
        c.send(Call(i, "f", [b]))
        v = _arg(r)
        assert not v.flags.writeable and np.array_equal(v, b)
    assert not c._lent
    del v


def test_polybus_own_read_only_copy_of_a_writable_array_arrives_writable(pair: Pair) -> None:
    # (a held call's argument, or a cached operand sent by value after a miss: copies
    # polybus made read-only for its own second look, not frozen by the program)
    c, r = pair
    kept = kept_copy(np.ones((N, N)))
    assert frozen(kept) and not program_froze(kept)
    copies = shelf().copies
    for i in range(3):
        c.send(Call(i, "f", [kept]))
        v = _arg(r)
        assert v.flags.writeable and np.array_equal(v, kept)
    assert shelf().copies == copies  # copied per send, as any writable array
    del v


def test_an_answer_or_a_value_between_replicas_arrives_writable_though_sent_frozen(pair: Pair) -> None:
    c, r = pair
    b = _frozen(seed=4)
    copies = shelf().copies
    for i in range(2):  # (a replica's answer: a cached operand it returns, say)
        r.send(Result(i, b))
        got = list(c.receive())
        assert len(got) == 1 and isinstance(got[0], Result)
        assert got[0].value.flags.writeable and np.array_equal(got[0].value, b)
    assert shelf().copies == copies
    del got


@pytest.mark.parametrize("kind", [3, 8])
def test_a_table_entry_of_an_unknown_descriptor_kind_is_a_protocol_error(
        pair: Pair, kind: int, monkeypatch: pytest.MonkeyPatch) -> None:
    c, r = pair
    real = shmseg._DESC

    class Tampered:
        size = real.size
        iter_unpack = real.iter_unpack

        @staticmethod
        def pack(i: int, has_fd: int, seg: int, n: int) -> bytes:
            return real.pack(i, kind, seg, n)

    monkeypatch.setattr(shmseg, "_DESC", Tampered)
    c.send(Call(1, "f", [np.ones((N, N))]))
    monkeypatch.setattr(shmseg, "_DESC", real)
    with pytest.raises(ProtocolError, match=r"descriptor kind|unknown segment"):
        list(r.receive())


SERVER = """
    def times(row, b):
        return row @ b

    def scale(b):
        b *= 2
        return float(b.sum())
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait
    from polybus.errors import RemoteException

    times, scale = use("times"), use("scale")

    def main(n=200):
        rng = np.random.default_rng(5)
        a, b = rng.random((n, n)), rng.random((n, n))
        b.flags.writeable = False
        rows = [times(a[i:i + 20], b) for i in range(0, n, 20)]
        ok = bool(np.allclose(np.vstack([wait(p) for p in rows]), a @ b))
        try:
            wait(scale(b))
            note = ""
        except RemoteException as exc:
            note = exc.remote_message
        return [ok, note, float(wait(scale(np.ones(3))))]
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    transport = "shm"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.times = {{ callstyle = "{style}" }}
    use.scale = {{ callstyle = "{style}" }}

    [bind]
    "client.times" = "server.times"
    "client.scale" = "server.scale"
"""


@pytest.mark.timeout(60)
def test_a_stateless_program_gets_its_answers_and_a_write_into_a_frozen_argument_is_explained(
        tmp_path: Any) -> None:
    import polybus
    from polybus.testing.apps import write_app

    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(style="async"))
    ok, note, fine = polybus.run(app, worker_output=None).result
    assert ok and fine == 6.0
    assert note.startswith("output array is read-only (b was read-only in the client")
    assert "b = b.copy()" in note and "cached operand" not in note


HELD_CLIENT = """
    import numpy as np
    from polybus import use, wait
    from polybus.errors import RemoteException

    scale = use("scale")

    def main(n=200):
        out = []
        for p in [scale(np.ones((n, n))) for _ in range(4)]:  # writable, never frozen
            try:
                out.append(wait(p))
            except RemoteException as exc:
                out.append(exc.remote_message)
        return out
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", ["async", "async-demand(1)"])
def test_a_held_calls_copy_of_a_writable_argument_arrives_writable(
        tmp_path: Any, style: str) -> None:
    # async-demand(1) holds the calls past the first in its backlog, each with a copy of
    # its argument that polybus made read-only (client/snapshot.py): not the program's
    # doing, so it travels as the writable array it was.
    import polybus
    from polybus.testing.apps import write_app

    app = write_app(tmp_path, server=SERVER, client=HELD_CLIENT, toml=TOML.format(style=style))
    assert polybus.run(app, worker_output=None).result == [80000.0] * 4
