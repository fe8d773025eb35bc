"""A call too large to send fails alone, with a clear error, and its replica serves on.
It was taken for a broken connection: the link was dropped and the caller told "every
replica of size is gone", though nothing had been written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import polybus
from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.errors import MessageTooLarge, RemoteException
from polybus.testing.peers import next_message
from polybus.token import make_token
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import BatchResult, Call, CallBatch, Fail, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = make_token()
LIMIT = 1 << 20


def size(b: bytes) -> int:
    return len(b)


@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_call_over_the_frame_limit_fails_alone(style: str) -> None:
    rt = WorkerRuntime("w", {"size": size}, TOKEN).start()
    reactor = Reactor()
    try:
        link = ReplicaLink("w", "server", connect(rt.address, TOKEN, Codec(max_frame=LIMIT)))
        reactor.add(link)
        d = Dispatcher("size", reactor, [link], CallStyle(style))
        reactor.on_lost = d.lost
        # (named: the run's error said only how many bytes, with no call in sight)
        with pytest.raises(MessageTooLarge, match=r"^size\(\.\.\.\): the call's message of "
                           r"\d+ bytes is over the frame limit.*max_frame"):
            d((b"x" * (2 * LIMIT),), {})
        assert not link.dead and not link.outstanding
        got = d((b"y" * 1000,), {})
        assert (got if style == "sync" else wait(got)) == 1000  # the same replica serves on
    finally:
        reactor.close()
        rt.stop()


def big(n: int) -> bytes:
    return b"z" * n


def test_a_result_over_the_frame_limit_is_answered_with_why() -> None:
    """The replica cannot send a result over its frame limit: the call gets an error
    that says so (it used to get nothing: the failed send was taken for a lost client),
    as a MessageTooLarge (it was said to be a TypeError, which it is not)."""
    rt = WorkerRuntime("w", {"big": big}, TOKEN, options=ServeOptions(max_frame=LIMIT)).start()
    reactor = Reactor()
    try:
        link = ReplicaLink("w", "server", connect(rt.address, TOKEN, Codec()))
        reactor.add(link)
        d = Dispatcher("big", reactor, [link], CallStyle("sync"))
        reactor.on_lost = d.lost
        with pytest.raises(RemoteException, match="over the frame limit") as info:
            d((2 * LIMIT,), {})
        assert info.value.remote_type == "MessageTooLarge"
        assert re.match(r"the value it returned cannot be sent: message of \d+ bytes is "
                        rf"over the frame limit of {LIMIT} bytes", info.value.remote_message)
        assert d((10,), {}) == b"z" * 10  # and it serves on
    finally:
        reactor.close()
        rt.stop()


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_plain_sync_call_over_the_limit_names_its_interface(tmp_path: Path,
                                                             transport: str) -> None:
    """The sync lanes (client/lane.py for shm, socketlane.py for tcp) raise it too."""
    (tmp_path / "srv.py").write_text("def size(b):\n    return len(b)\n")
    (tmp_path / "cli.py").write_text(
        "from polybus import use\n\nsize = use('size')\n\n"
        "def main():\n    try:\n        size(b'x' * 3_000_000)\n"
        "    except Exception as e:\n        return [type(e).__name__, str(e), size(b'y')]\n")
    (tmp_path / "app.toml").write_text(
        f'[modules.server]\nsource = "srv.py"\ntransport = "{transport}"\n'
        '[modules.client]\nsource = "cli.py"\nentrypoint = "main"\n'
        '[bind]\n"client.size" = "server.size"\n[cluster]\nmax_frame = "1MiB"\n')
    name, text, after = polybus.run(tmp_path / "app.toml").result
    assert name == "MessageTooLarge" and text.startswith("size(...): the call's message of ")
    assert after == 1  # (and the replica serves on)


def test_a_batch_whose_answers_together_are_over_the_limit_is_answered() -> None:
    """Each of a batch's answers fits a frame, all of them together do not: the largest
    fail (saying why, and what to change) until the rest fit, and every call is answered.
    The batch used to get no answer at all: the second failed send was taken for a lost
    client, and the caller waited for ever."""
    rt = WorkerRuntime("w", {"big": big}, TOKEN, options=ServeOptions(max_frame=LIMIT)).start()
    ch = connect(rt.address, TOKEN, Codec(max_frame=1 << 30))
    try:
        sizes = [300_000, 1_000, 300_000, 300_000, 300_000, 2_000]
        ch.send(CallBatch(7, "big", [[n] for n in sizes]))
        got = next_message(ch, 10.0)
        assert isinstance(got, BatchResult) and got.id == 7
        failed = {f.id: f for f in got.fails}
        assert len(failed) == 1 and set(failed) <= {0, 2, 3, 4}  # a largest, and no more
        for f in failed.values():
            assert "did not fit in one frame" in f.message and "aggregate fewer calls" in f.message
            assert f.type == "MessageTooLarge"
        for i, n in enumerate(sizes):  # the others, answered with their values
            assert got.values[i] == (None if i in failed else b"z" * n)
        ch.send(Call(8, "big", [3]))
        assert next_message(ch, 10.0) == Result(8, b"zzz")  # and it serves on
    finally:
        ch.close()
        rt.stop()


def test_a_batch_of_many_small_answers_over_the_limit_fails_whole_and_says_why() -> None:
    """Failing a value does not shrink a batch of small answers (a failure is no smaller
    than each): it is answered by one Fail of the batch's id, which fails every call of
    it at the client. It got no answer at all, and a run with aggregate = 4000 and a
    small max_frame hung (found by a review)."""
    rt = WorkerRuntime("w", {"word": lambda i: f"{i:040d}"}, TOKEN,
                       options=ServeOptions(max_frame=8192)).start()
    ch = connect(rt.address, TOKEN, Codec(max_frame=1 << 30))
    try:
        ch.send(CallBatch(9, "word", [[i] for i in range(1000)]))
        got = next_message(ch, 10.0)
        assert isinstance(got, Fail) and got.id == 9, got
        assert "do not fit in one frame together (max_frame 8192 bytes)" in got.message
        assert got.type == "MessageTooLarge"
        ch.send(Call(10, "word", [3]))
        assert next_message(ch, 10.0) == Result(10, f"{3:040d}")  # and it serves on
    finally:
        ch.close()
        rt.stop()


def test_an_aggregated_run_whose_batches_cannot_fit_fails_each_call_and_ends(
        tmp_path: Path) -> None:
    (tmp_path / "srv.py").write_text("def word(i):\n    return f'{i:0100d}'\n")
    (tmp_path / "cli.py").write_text(
        "from polybus import RemoteException, use, wait\n\nword = use('word')\n\n"
        "def main():\n    ps = [word(i) for i in range(4000)]\n    failed = 0\n"
        "    for p in ps:\n        try:\n            wait(p)\n"
        "        except RemoteException as e:\n            failed += 1\n"
        "            why = e.remote_message\n    return failed, why\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "srv.py"\n[modules.client]\nsource = "cli.py"\n'
        'entrypoint = "main"\nuse.word = { callstyle = "async", aggregate = 4000, '
        'linger = "1s" }\n[bind]\n"client.word" = "server.word"\n[cluster]\n'
        'max_frame = "256KiB"\n')
    failed, why = polybus.run(tmp_path / "app.toml", timeout=60).result
    assert failed == 4000 and "do not fit in one frame together" in why


FORWARD_TOML = """\
[modules.stage1]
source = "stage1.py"
transport = "{transport}"

[modules.stage2]
source = "stage2.py"
transport = "{transport}"

[modules.client]
source = "cli.py"
entrypoint = "main"
use.make = {{ callstyle = "async" }}
use.size = {{ callstyle = "async" }}

[bind]
"client.make" = "stage1.make"
"client.size" = "stage2.size"

[cluster]
max_frame = "1MiB"
"""


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_forwarded_value_over_the_limit_fails_its_consumer_alone(
        tmp_path: Path, transport: str, capfd: pytest.CaptureFixture[str]) -> None:
    """Two stages, the first's value forwarded to the second's replica: one over the
    frame limit fails the consumer as a too-large answer does (MessageTooLarge, saying
    it was the forwarded value), and forwards after it go on. It failed as a peer out
    of reach ("could not send the value to ..."), and the producer's replica dropped its
    connection to the consumer's."""
    (tmp_path / "stage1.py").write_text(
        "import time\n\ndef make(n):\n    time.sleep(0.2)  # (the Forward comes first)\n"
        "    return b'x' * n\n")
    (tmp_path / "stage2.py").write_text("def size(b):\n    return len(b)\n")
    (tmp_path / "cli.py").write_text(
        "from polybus import RemoteException, use, wait\n\n"
        "make = use('make')\nsize = use('size')\n\n"
        "def main():\n    out = []\n    for n in (1000, 3_000_000, 2000):\n"
        "        try:\n            out.append(wait(size(make(n))))\n"
        "        except RemoteException as e:\n"
        "            out.append([e.remote_type, e.remote_message])\n    return out\n")
    (tmp_path / "app.toml").write_text(FORWARD_TOML.format(transport=transport))
    first, (kind, why), after = polybus.run(tmp_path / "app.toml", timeout=60).result
    assert first == 1000 and after == 2000
    assert kind == "MessageTooLarge"
    assert re.match(r"an upstream call failed: the forwarded value cannot be sent on to "
                    r"\S+: message of \d+ bytes is over the frame limit of 1048576 bytes",
                    why), why
    assert "cannot forward" not in capfd.readouterr().err  # (the producer's warning, gone)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_call_over_the_frame_limit_names_the_users_line(tmp_path: Path, style: str) -> None:
    """As an argument that cannot be sent does (UnsendableError): the run's error says
    where the call was made. It said only the interface and the sizes, with no line."""
    (tmp_path / "srv.py").write_text("def size(b):\n    return len(b)\n")
    (tmp_path / "cli.py").write_text(
        "from polybus import use, wait\n\nsize = use('size')\n\n"
        "def main():\n    return wait(size(b'x' * 3_000_000))\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "srv.py"\n[modules.client]\nsource = "cli.py"\n'
        f'entrypoint = "main"\nuse.size = {{ callstyle = "{style}" }}\n'
        '[bind]\n"client.size" = "server.size"\n[cluster]\nmax_frame = "1MiB"\n')
    with pytest.raises(MessageTooLarge) as info:
        polybus.run(tmp_path / "app.toml")
    cli = tmp_path / "cli.py"
    assert info.value.call_site == f"{cli}:6"
    head, at, code = str(info.value).split("\n")
    assert head.startswith("size(...): the call's message of ")
    assert at == f'  the call at File "{cli}", line 6, in main:'
    assert code.strip() == "return wait(size(b'x' * 3_000_000))"
