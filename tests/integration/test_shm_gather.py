"""Over shm, a large non-contiguous array (a column block, a transposed or reversed view)
is gathered straight into its segment, not made contiguous first and then copied:
whatever its layout, the receiver gets the same values, in C order."""

from __future__ import annotations

import gc
import socket
from typing import Any

import numpy as np

from polybus.testing.conformance import memfd_mappings
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Put

M = np.random.default_rng(5).random((512, 512))  # 2 MB


def _views() -> list[Any]:
    big_endian = M[:, :100].astype(">f8")
    return [
        M[:, 128:256],          # a column block: 512 KB, strided rows
        M.T,                    # Fortran order
        M[::-1, ::2],           # negative and doubled strides
        big_endian[:, ::-1],    # another byte order
        M[:, :8],               # small: below the threshold, inline as before
        M[:256],                # contiguous rows
        np.asfortranarray(M)[:, 0],  # (contiguous column of a Fortran array)
    ]


def test_codec_leaves_large_strided_arrays_to_the_transport() -> None:
    codec = Codec()
    _, bufs = codec.encode_parts(Call(1, "f", [M[:, :128], M[:, :8], M[:128]]), 64 * 1024)
    assert isinstance(bufs[0], np.ndarray)  # gathered later, by the transport
    assert isinstance(bufs[1], memoryview) and isinstance(bufs[2], memoryview)
    _, plain = codec.encode_parts(Call(1, "f", [M[:, :128]]))
    assert isinstance(plain[0], memoryview)  # without gather: contiguous now


def test_any_layout_arrives_equal_and_c_ordered() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    tx, rx = ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")
    try:
        views = _views()
        tx.send(Call(1, "f", views))
        tx.send(Put("k-gather", M[:, 64:320]))  # an operand's segment is gathered too
        msgs: list[Any] = []
        while len(msgs) < 2:
            msgs.extend(rx.receive())
        call, put = msgs
        assert isinstance(call, Call) and isinstance(put, Put)
        for got, want in zip(call.args, views, strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert np.array_equal(got, want) and got.flags.c_contiguous
        assert np.array_equal(put.value, M[:, 64:320])
        assert tx.shm_bytes_sent >= sum(v.nbytes for v in views[:4])
        del call, put, got, msgs
    finally:
        tx.close()
        rx.close()
    gc.collect()
    assert memfd_mappings() == 0
