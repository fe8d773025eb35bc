"""Two kinds of kill that chaosmix.py's draws seldom make, run by its machinery and held
to the same promises (docs/reliability.md, "Forwarded values that never come",
"Delivery and execution"): the client alone's answers, or the documented
``WorkerDiedError`` for an interface with ``idempotent = false``; never a hang, never
another error, nothing left.

- ``keep(seed)``: ``forward = "keep"`` on ``produce`` (its 96 KB answers stay on the
  replica that made them), and a replica of ``s1`` SIGKILLed while it keeps some: while
  the producers still run (``after`` 1..10), or once they have all answered and the
  small calls run (11..40); in half the draws the one that ran an even producer
  (``aim``), once that many calls of ``s1`` have begun, none held. The program reads the even producers' arrays at its end
  (fetched from the replica that keeps each), and ``consume`` is sometimes held at the
  client (``async-demand``), so that its call is placed once the value's replica may be
  gone. Each value lost must be made again on the replica left (the same answer).
- ``poison(seed)``: replication 3 for the module killed, and two of its replicas
  SIGKILLed one after the other: the second the one that runs the first's held call
  again (``then = -1``: that call is lost twice, and by the poison rule runs alone the
  third time and answers: never ``PoisonCallError``, which takes 3 losses), or the one
  that begins a later call.

For a human, from the repository's root::

    .venv/bin/python -m tests.integration.chaoskeep keep 30 -v
    .venv/bin/python -m tests.integration.chaoskeep poison 30 --first 100 -v
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from . import chaosmix, stratmix
from .chaosmix import Chaos, Kill
from .stratmix import DEFINES, Combo, Override


def _common(r: random.Random, out: list[Override]) -> None:
    pickle = r.random() < 0.3  # both or neither: a promise of a module with pickle on
    for m in DEFINES:  # passed to one with it off comes through the client (strategies.md)
        out.append((f"modules.{m}.transport", r.choice(["tcp", "ipc", "shm"])))
        if pickle:
            out.append((f"modules.{m}.pickle", True))
    for iface in ("small", "matvec", "scaled", "ranked"):
        out.append((f"modules.client.use.{iface}.callstyle",
                    r.choice(["sync", "async", "async-demand(1)", "async-demand(3)"])))
    if r.random() < 0.5:
        out.append(("modules.client.use.small.aggregate", r.choice([4, 64])))


def keep(seed: int) -> Chaos:
    """A run with ``forward = "keep"`` on ``produce`` and a replica of ``s1`` killed."""
    r = random.Random(f"chaoskeep keep {seed}")
    out: list[Override] = [
        ("modules.s1.replication", r.choice([2, 2, 3, "s1a,s1b", "s1a:speed=0.5,s1b"])),
        ("modules.s2.replication", r.choice([1, 2, 3])),
        ("modules.client.use.produce.callstyle", "async"),
        ("modules.client.use.produce.forward", "keep"),
        ("modules.client.use.consume.callstyle",
         r.choice(["async", "async", "async-demand(1)", "async-demand(3)", "sync"])),
    ]
    if r.random() < 0.3:
        out.append(("modules.s1.define.produce.pool", r.choice(["threads:3", "processes:2"])))
    if r.random() < 0.2:
        out.append(("modules.s1.define.produce.idempotent", False))
    _common(r, out)
    after = r.randint(1, 10) if r.random() < 0.5 else r.randint(11, 40)
    kill = Kill("s1", after, r.choice([0.0005, 0.002, 0.005]))
    if r.random() < 0.5:  # aimed: the replica that keeps an array the program reads
        i = r.choice([0, 2, 4, 6, 8])
        kill.after, kill.aim = r.randint(i + 2, 40), f"produce {i}"
    return Chaos(Combo(seed, out), kill)


def poison(seed: int) -> Chaos:
    """A run whose killed module has 3 replicas, two of them killed one after the other."""
    r = random.Random(f"chaoskeep poison {seed}")
    m = r.choice(["s1", "s2"])
    other = "s2" if m == "s1" else "s1"
    out: list[Override] = [(f"modules.{m}.replication", r.choice([3, 3, "xa,xb,xc".replace("x", m)])),
                           (f"modules.{other}.replication", r.choice([1, 2]))]
    out += [("modules.client.use.produce.callstyle", r.choice(["async", "async-demand(2)"])),
            ("modules.client.use.consume.callstyle", r.choice(["async", "async-demand(2)"]))]
    if r.random() < 0.3:
        out.append((f"modules.{m}.define.{r.choice(DEFINES[m])}.pool",
                    r.choice(["threads:3", "processes:2"])))
    if r.random() < 0.2:
        out.append((f"modules.{m}.define.{r.choice(DEFINES[m])}.idempotent", False))
    _common(r, out)
    total = chaosmix.CALLS[m]
    after = r.randint(1, total // 2)
    then = -1 if r.random() < 0.6 else r.randint(after + 1, int(total * 0.8))
    return Chaos(Combo(seed, out), Kill(m, after, r.choice([0.0005, 0.002, 0.005]), then))


KINDS = {"keep": keep, "poison": poison}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.integration.chaoskeep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("n", nargs="?", type=int, default=20, help="seeds to try")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this seed alone")
    ap.add_argument("--limit", type=float, default=25.0, help="seconds a run may take")
    ap.add_argument("--show", action="store_true", help="print each draw's --sets and kill")
    ap.add_argument("-v", action="store_true", help="a line for each draw")
    a = ap.parse_args(argv)
    seeds = [a.seed] if a.seed is not None else list(range(a.first, a.first + a.n))
    want = stratmix.baseline()
    if want.rc != 0 or not want.digest:
        print(f"the baseline failed (rc {want.rc}):\n{want.stderr}", file=sys.stderr)
        return 100
    failed = killed = 0
    for seed in seeds:
        chaos = KINDS[a.kind](seed)
        if a.show:
            print(f"seed {seed}: kill {chaos.kill}: " + " ".join(f"--set '{s}'" for s in chaos.sets()))
        t0 = time.monotonic()
        why, done = chaosmix.check(chaos, want, a.limit)
        killed += bool(done.name)
        if why:
            failed += 1
            print(f"seed {seed}: FAILED: {why}", flush=True)
        elif a.v:
            what = f"killed {done.name} at call {done.calls}" if done.name else done.why_not
            print(f"seed {seed}: {what}{', then ' + done.second if done.second else ''}; "
                  f"as documented, {time.monotonic() - t0:.1f} s; ran again: {' '.join(done.notes[:12])}", flush=True)
    print(f"{len(seeds)} draw(s) run, {killed} with a replica killed, {failed} failed", file=sys.stderr)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
