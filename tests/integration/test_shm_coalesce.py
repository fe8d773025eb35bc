"""A module's ``coalesce`` (worker/bells.py): over shm, a replica with more of a
client's calls queued holds back the bells of its answers, ringing when its queue is
empty or ``coalesce`` after the first one held. The same modules give the same answers;
an answer held is still delivered within the bound, not at the end of the queue; and
the key is checked like any other."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.config import validate
from polybus.testing.apps import write_one_call_app
from polybus.transport import ring as ring_mod
from polybus.transport.spinning import SPIN_S
from polybus.worker.main import options_for

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the shm ring needs x86-64")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "matmul"


def test_same_answers_with_and_without_coalescing() -> None:
    got = []
    for extra in ([], ["modules.server.coalesce=20ms"]):
        r = polybus.run(EXAMPLE / "stateful.toml",
                        ["modules.server.transport=shm", "modules.server.replication=2",
                         "modules.client.args=[120]", *extra], worker_output=False)
        assert r.result["correct"]
        got.append(r.result["checksum"])
    assert got[0] == got[1]


SLEEPY = """\
import time

def f(seconds):
    time.sleep(seconds)
    return [seconds, time.monotonic()]  # (one clock for every process of this host)
"""

CLIENT = """\
import time

from polybus import use, wait

f = use("f")

def main(first):
    # The calls before the long ones: one of 50 ms (its answer's bell held back while
    # the long ones wait behind it), or 20 tiny ones (the last one's answer corked).
    before = [f(s) for s in first]
    long1, long2 = f(0.6), f(0.6)
    wait(before[-1])
    got = time.monotonic()
    long1_ended = wait(long1)[1]
    wait(long2)
    # Held back at most 20 ms (a bell) or 2 ms (a cork), the answer came while the first
    # long call ran; held until the queue drained, it came after that call had ended.
    return got < long1_ended
"""


@pytest.mark.parametrize(("server", "first"), [('transport = "shm"\ncoalesce = "20ms"', [0.05]),
                                               ('transport = "tcp"', [0.0] * 20)])
def test_a_held_answer_comes_within_the_bound_not_at_the_end_of_the_queue(
        tmp_path: Path, server: str, first: list[float]) -> None:
    # (tcp: no bell to hold, but a tiny call's answer is corked while more calls wait,
    # worker/replies.py; it waited out the 0.6 s call behind it)
    app = write_one_call_app(tmp_path, server_keys=server, server=SLEEPY, client=CLIENT)
    r = polybus.run(app, [f"modules.client.args=[{first}]",
                          'modules.client.use.f={callstyle="async"}'], worker_output=False)
    assert r.result is True


@pytest.mark.parametrize(("line", "expected", "spin"), [
    ("", 0.0, SPIN_S),
    ('transport = "shm"\ncoalesce = "5ms"', 5e-3, 0.0),
    ('coalesce = "5ms"', 5e-3, SPIN_S),  # (over tcp it changes nothing)
    ('transport = "shm"\ncoalesce = 0', 0.0, SPIN_S)])
def test_the_setting_is_read_and_stops_the_replicas_spin(
        tmp_path: Path, line: str, expected: float, spin: float) -> None:
    write_one_call_app(tmp_path, server_keys=line)
    config, problems = validate(str(tmp_path / "app.toml"))
    assert not problems and config is not None
    spec = config.modules["server"]
    assert spec.coalesce == pytest.approx(expected)
    assert options_for(spec, None, 1 << 20).spin_s == pytest.approx(spin)


@pytest.mark.parametrize(("line", "says"), [('coalesce = "5s"', "at most '1s'"),
                                            ('coalesce = "soon"', "not a duration"),
                                            ('coalesce = "-1ms"', "must not be negative"),
                                            ('coalesce = "100ns"', "at least '1us'")])
def test_a_bad_setting_is_named(tmp_path: Path, line: str, says: str) -> None:
    write_one_call_app(tmp_path, server_keys=line)
    _, problems = validate(str(tmp_path / "app.toml"))
    text = "\n".join(str(p) for p in problems)
    assert problems and "coalesce" in text and says in text, text
