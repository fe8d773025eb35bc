"""A shared registry, a client, or both, killed mid-run at workers started by hand, do
what docs/reliability.md promises: two seeded draws of tests/integration/chaosreg.py
(the registry SIGKILLed and back on its address while the run goes on, the client
SIGKILLed after it; the registry SIGTERMed and back only after a run found none), and
checks that its comparisons can fail. More, at random, for a human: ``python -m
tests.integration.chaosreg N``."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from . import chaosreg, holdings, stratmix, tlsmix
from .stratmix import Outcome

# 6: registry SIGKILL, back 1 s later, and the client SIGKILLed (the workers' holdings
# then compared); 9: registry SIGTERM, back once a run found none on its address
FIXED = [6, 9]


@pytest.fixture(scope="module")
def want() -> Outcome:
    out = stratmix.baseline()
    assert out.rc == 0 and out.digest, out.stderr
    return out


def test_the_fixed_draws_kill_what_they_say() -> None:
    both, later = (chaosreg.draw(s) for s in FIXED)
    assert both is not None and later is not None
    assert (both.what, both.sig, both.back) == ("both", signal.SIGKILL, "soon")
    assert (later.what, later.sig, later.back) == ("registry", signal.SIGTERM, "later")
    kinds = {(d.what, d.back) for d in map(chaosreg.draw, range(60)) if d is not None}
    assert {("client", "soon"), ("registry", "later"), ("both", "later")} <= kinds


@pytest.mark.parametrize("seed", FIXED)
def test_a_draw_does_as_documented(want: Outcome, seed: int) -> None:
    plan = chaosreg.draw(seed)
    assert plan is not None
    problems, seen = chaosreg.run(plan, want, limit=30.0)
    assert problems == [], f"seed {seed} ({plan}): " + "\n".join(problems)
    assert seen.registry_gone and not seen.why_not, seen
    assert bool(seen.client_gone) == (plan.what == "both"), seen


def _holding(**kw: int) -> holdings.Holding:
    h = dict(sockets=5, memfds=0, other=6, threads=6, peer_in=0, peers_out=0, client_in=0)
    h.update(kw)
    return holdings.Holding(**h, probe={"queue": 0, "cache": 0, "arrived": 0})  # type: ignore[arg-type]


def test_what_a_worker_kept_for_a_client_gone_is_seen() -> None:
    """The comparison can fail: a client's connection, a descriptor, a cached operand
    kept are each said; the connections between workers, and a value forwarded for
    a client that may dial again (kept 5 minutes, documented), are not."""
    was = _holding()
    assert holdings.more(_holding(), was) == {}
    assert holdings.more(_holding(sockets=7, peer_in=1, peers_out=1, memfds=4), was) == {}
    assert "client connections" in holdings.more(_holding(sockets=6, client_in=1), was)
    assert "descriptors (not sockets, not memfds)" in holdings.more(_holding(other=7), was)
    assert "sockets beside the workers' connections" in holdings.more(_holding(sockets=6), was)
    now = _holding()
    now.probe = {"queue": 0, "cache": 1, "arrived": 3}
    assert holdings.more(now, was) == {"cache": "0 -> 1"}


def test_a_worker_that_said_nothing_of_its_registry_is_seen(tmp_path: Path) -> None:
    """The check of what the workers say can fail: one that said it lost the registry
    but not that it registered again, or said it twice, is named."""
    procs = []
    for name, text in [("s1:a", "lost the registry at x\nregistered again\n"),
                       ("s1:b", "lost the registry at x\n"),
                       ("s2:c", "lost the registry at x\nlost the registry at x\nregistered again\n")]:
        log = tmp_path / f"{name}.log"
        log.write_text(text)
        procs.append((name, subprocess.Popen([sys.executable, "-c", ""]), log))
    for _, p, _ in procs:
        p.wait()
    bh = tlsmix.ByHand(tlsmix.Hand(procs), "", tmp_path / "token", {}, [])
    said = chaosreg._worker_said(bh)
    assert [s.split(" ", 1)[0] for s in said] == ["s1:b", "s2:c"], said
