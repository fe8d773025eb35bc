"""Combinations of every strategy give the program's answer: a fixed list of seeded
combinations (tests/integration/stratmix.py draws them) of the mix program, each
checked against the same program with every module in the client (replication = 0),
each run leaving no process and nothing in its $TMPDIR; the combinations the docs
refuse are refused by `polybus check`, naming the key. More, at random, for a human:
``python -m tests.integration.stratmix N``."""

from __future__ import annotations

import pytest

from . import stratmix
from .stratmix import Outcome

# Chosen so that together they set every key the generator draws, and each kind of
# value of replication, callstyle, forward, balance, transport, cache and pool, at least
# twice (test_the_fixed_list_covers_every_key); four are combinations the docs refuse.
FIXED = [120, 147, 104, 232, 131, 9, 108, 0, 3, 7, 303, 250]


@pytest.fixture(scope="module")
def want() -> Outcome:
    out = stratmix.baseline()
    assert out.rc == 0 and out.digest, out.stderr
    assert not out.left, out.left
    return out


def test_the_fixed_list_covers_every_key() -> None:
    seen: dict[str, int] = {}
    for seed in FIXED:
        for f in stratmix.features(stratmix.draw(seed)):
            seen[f] = seen.get(f, 0) + 1
    assert {f for f in stratmix.ALL_FEATURES if seen.get(f, 0) < 2} == set()
    assert set(seen) <= stratmix.ALL_FEATURES  # a feature drawn but not listed


def test_the_baseline_digests_every_call(want: Outcome) -> None:
    # 10 pipeline items (two entries each), 80 small, 12 matvec, 10 scaled, 12 ranked
    assert len(want.entries) == 20 + 80 + 12 + 10 + 12


@pytest.mark.parametrize("seed", FIXED)
def test_a_combination_gives_the_same_answers(want: Outcome, seed: int) -> None:
    combo = stratmix.draw(seed)
    why = stratmix.check(combo, want, limit=30.0)
    assert why == "", f"seed {seed}: {' '.join(combo.sets())}\n{why}"


def test_a_changed_answer_is_seen(want: Outcome) -> None:
    """The check can fail: the same program with other arguments gives other entries."""
    combo = stratmix.Combo(-1, [("modules.client.args", [10, 80, 12, 10, 11])])
    why = stratmix.check(combo, want, limit=30.0)
    assert "digest" in why


def test_a_call_a_steal_gives_back_to_its_backlog_is_placed() -> None:
    """A migration path on the module of a pipeline's producers and of an
    async-demand(2) binding: a steal gave back one of the binding's calls with no room
    for it at the stealing replica, into its backlog, its record still naming the
    replica that gave it back; the program's wait for it read that replica alone, and
    the run hung (in most runs of 20 rounds). Each run's answers are the client's."""
    args = "modules.client.args=[3, 80, 0, 0, 0, 20]"
    want = stratmix.run(["run", str(stratmix.APP)], 30,
                        [args, *(f"{k}={v}" for k, v in stratmix.BASELINE)])
    assert want.rc == 0 and want.digest, want.stderr
    got = stratmix.run(["run", str(stratmix.APP)], 40,
                       [args, 'modules.s1.replication="s1a#s1b"',
                        'modules.client.use.small.callstyle="async-demand(2)"'])
    assert got.rc == 0, got.stderr[-3000:]
    assert got.digest == want.digest
    assert not got.left
