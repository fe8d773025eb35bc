"""polybus.lazynumpy: in a process where numpy is not imported (a worker whose module
uses no arrays), the array checks say "not an array" without importing it, and the
codec encodes without it; an array received is still made, numpy imported then."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

from polybus.wire.codec import Codec
from polybus.wire.messages import Result

CHILD = textwrap.dedent("""
    import sys

    import polybus.cli.cmd_worker, polybus.worker.main  # a worker's modules
    from polybus.lazynumpy import is_array, is_plain_array, ndarray_type
    from polybus.wire.codec import Codec
    from polybus.wire.framing import FrameDecoder
    from polybus.wire.messages import Result

    Codec().encode(Result(id=1, value=[1, "two", b"3", {"four": 4.0}]))
    assert ndarray_type() is None and not is_array([1]) and not is_plain_array(b"")
    assert "numpy" not in sys.modules, "imported by a worker's modules or the codec"

    d = FrameDecoder()
    d.feed(sys.stdin.buffer.read())
    got = []
    while (frame := d.next_frame()) is not None:
        got.append(Codec().decode(frame).value)
    import numpy as np  # (imported by the decoding already)

    assert [type(a) for a in got] == [np.ndarray, np.ndarray], got
    assert got[0].tolist() == list(range(5)) and got[1].shape == (5000,) and got[1].sum() == 5000
    m = np.ma.masked_array([1, 2], mask=[0, 1])
    assert ndarray_type() is np.ndarray
    assert is_array(got[1]) and is_plain_array(got[1])
    assert is_array(m) and not is_plain_array(m)  # (a subclass)
    assert not is_array([1]) and not is_plain_array(b"")
    print("ok")
""")


def test_no_numpy_until_an_array_comes_and_then_numpy_s_own_checks() -> None:
    # in the header (ext 5), and in a buffer beside it (ext 1)
    frames = b"".join(bytes(memoryview(p).cast("B"))
                      for v in (np.arange(5), np.ones(5000, dtype=np.int64))
                      for p in Codec().encode(Result(id=1, value=v)))
    p = subprocess.run([sys.executable, "-c", CHILD], input=frames, capture_output=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == b"ok", p.stderr.decode()
