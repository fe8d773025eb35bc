"""Combinations of every strategy, with one replica SIGKILLed partway through the run,
do what docs/reliability.md promises: a fixed list of seeded draws
(tests/integration/chaosmix.py), each giving the client alone's answers, or, where an
interface of the killed module has ``idempotent = false``, the documented
``WorkerDiedError`` for its calls; no hang, no process or file left. More, at random,
for a human: ``python -m tests.integration.chaosmix N``."""

from __future__ import annotations

import pytest

from . import chaosmix, stratmix
from .stratmix import Combo, Outcome

# Chosen so that together their kills exercise every feature ``kill_features`` gives
# over the first 360 seeds' draws (test_the_fixed_list_covers_every_kill_feature): each
# module killed, a replica killed beside an interface with ``idempotent = false``
# (120, 7), producers whose values were forwarded (1: the program then read a value
# whose replica had died, and failed with WorkerDiedError though the call could run
# again: test_forward_fetch_lost.py), process pools, aggregation, migration paths.
FIXED = [1, 120, 7, 5, 0, 53]


@pytest.fixture(scope="module")
def want() -> Outcome:
    out = stratmix.baseline()
    assert out.rc == 0 and out.digest, out.stderr
    return out


def test_the_fixed_list_covers_every_kill_feature() -> None:
    drawn = [d for d in map(chaosmix.draw, range(360)) if d is not None]
    every = set().union(*map(chaosmix.kill_features, drawn))
    fixed = [chaosmix.draw(s) for s in FIXED]
    assert all(d is not None for d in fixed)
    seen = set().union(*(chaosmix.kill_features(d) for d in fixed if d is not None))
    assert every - seen == set()
    assert {"kill:s1", "kill:s2", "may-fail", "forwarded", "pool:processes"} <= every


@pytest.mark.parametrize("seed", FIXED)
def test_a_replica_killed_mid_run_gives_the_documented_answers(want: Outcome, seed: int) -> None:
    chaos = chaosmix.draw(seed)
    assert chaos is not None
    why, done = chaosmix.check(chaos, want, limit=30.0)
    assert why == "", f"seed {seed}: kill {chaos.kill}: {' '.join(chaos.sets())}\n{why}"
    assert done.name and done.calls >= chaos.kill.after, done  # the kill was made, mid-run


def test_a_changed_answer_is_seen_beside_a_kill(want: Outcome) -> None:
    """The check can fail: other arguments give other entries, a replica killed or not."""
    chaos = chaosmix.Chaos(Combo(-1, [("modules.client.args", [10, 80, 12, 10, 11])]),
                           chaosmix.Kill("s2", 5, 0.001))
    why, done = chaosmix.check(chaos, want, limit=30.0)
    assert "digest" in why
    assert done.name.startswith("s2"), done
