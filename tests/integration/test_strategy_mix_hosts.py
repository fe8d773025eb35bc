"""Combinations of every strategy give the program's answer with mutual TLS on, and
against workers started by hand at a registry: a fixed list of seeded draws
(tests/integration/tlsmix.py adds TLS and workers by hand to stratmix.py's
combinations), each checked against the same program in the client alone; the
registry and workers by hand end on SIGTERM and leave nothing in their $TMPDIR; and a
worker by hand SIGKILLed mid-run does as docs/reliability.md says (chaosmix.py). More,
at random, for a human: ``python -m tests.integration.tlsmix N``, ``python -m
tests.integration.chaosmix N --by-hand --tls``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import chaosmix, mixrun, stratmix, tlsmix
from .stratmix import Combo, Outcome

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command")

# Chosen so that together they cover every feature of WANTED (below): TLS with the
# local engine's workers and with workers by hand, beside each transport; by hand, each
# kind of replication (counts, names, speeds, migration paths, zero), forward = "keep",
# process pools, balance; one combination the docs refuse, checked with TLS on.
FIXED = [358, 25, 32, 2, 9, 57]
WANTED = {
    "tls", "local", "by-hand", "tls+by-hand", "tls+local", "tls+transport:tcp",
    "tls+transport:shm", "tls+transport:ipc", "by-hand+replication:path",
    "by-hand+replication:speeds", "by-hand+replication:names", "by-hand+replication:count",
    "by-hand+replication:conditions", "by-hand+replication:zero", "by-hand+forward:keep",
    "by-hand+pool:processes", "by-hand+callstyle:async-demand(auto)",
    "by-hand+balance:steal", "by-hand+balance:least", "by-hand+cache:auto",
    "stratmix:refused:forward"}


@pytest.fixture(scope="module")
def want() -> Outcome:
    out = stratmix.baseline()
    assert out.rc == 0 and out.digest, out.stderr
    return out


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tlsmix.make_pki(tmp_path_factory.mktemp("tlsmix") / "pki")


def test_the_fixed_list_covers_every_wanted_feature() -> None:
    seen = set().union(*(tlsmix.features(tlsmix.draw(s)) for s in FIXED))
    assert WANTED - seen == set()


def test_a_draw_leaves_stratmix_draws_as_they_were() -> None:
    for seed in range(40):
        d, plain = tlsmix.draw(seed, tls=False), stratmix.draw(seed)
        assert d.combo == plain and not d.tls


@pytest.mark.parametrize("seed", FIXED)
def test_a_combination_gives_the_same_answers(want: Outcome, pki: Path, seed: int) -> None:
    d = tlsmix.draw(seed)
    why = tlsmix.check(d, want, pki, limit=30.0)
    assert why == "", f"seed {seed} (tls {d.tls}, by hand {d.by_hand}): {' '.join(d.sets(pki))}\n{why}"


def test_a_changed_answer_is_seen_by_hand(want: Outcome, pki: Path) -> None:
    """The check can fail: by hand, with TLS, other arguments give other entries."""
    d = tlsmix.Draw(Combo(-1, [("modules.client.args", [10, 80, 12, 10, 11])]), True, True)
    why = tlsmix.check(d, want, pki, limit=30.0)
    assert "digest" in why


def test_a_process_by_hand_that_outlives_sigterm_is_said_and_killed(tmp_path: Path) -> None:
    """The check of what a run by hand leaves can fail: a process that ignores SIGTERM
    is said (then killed with its group)."""
    log = tmp_path / "stubborn.log"
    with log.open("wb") as f:
        p = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
    hand = tlsmix.Hand([("stubborn", p, log)])
    assert hand.wait_for("(ready)", seconds=30) == ["ready"]
    left = hand.stop()
    assert len(left) == 1 and left[0].startswith("stubborn: pids ["), left
    assert p.poll() is not None and mixrun._group(p.pid) == []


STUBBORN = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(60)\n")


def test_workers_by_hand_not_under_tls_are_seen() -> None:
    """The check of TLS by hand can fail: a draw said to be under TLS whose registry and
    workers were given no TLS files (``pki`` None) never said mutual TLS."""
    d = tlsmix.Draw(Combo(-2, [("modules.s1.replication", 0), ("modules.s2.replication", 1)]),
                    True, True)
    got = tlsmix.run_by_hand(d, None, 30.0)
    assert got.rc == 1 and "not said under TLS: ['registry', 's2:s2-0']" in got.stderr
    assert got.left == []


@pytest.mark.parametrize(("seed", "tls"), [(1, True), (120, False)])
def test_a_replica_by_hand_killed_mid_run_does_as_documented(
        want: Outcome, pki: Path, seed: int, tls: bool) -> None:
    """chaosmix.py's kill, of a worker started by hand: its producers' values forwarded
    (1, under TLS), beside interfaces with ``idempotent = false`` (120). The answers of
    the client alone, or the documented WorkerDiedError; its sockets' folder, which no
    one is left to remove, is the only thing left."""
    chaos = chaosmix.draw(seed)
    assert chaos is not None
    if tls:
        chaos.combo = tlsmix.with_tls(chaos.combo, pki)
    why, done = chaosmix.check(chaos, want, limit=30.0, by_hand=True)
    assert why == "", f"seed {seed}: kill {chaos.kill}: {' '.join(chaos.sets())}\n{why}"
    assert done.name and done.calls >= chaos.kill.after, done
