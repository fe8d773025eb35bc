"""Random combinations of every strategy, driven through one program, each checked
against the same program with every module called in the client (replication = 0).

The program is ``tests/integration/apps/mix``: a two-stage pipeline whose first stage
answers 96 KB arrays (forwarding), 80 small calls (aggregation), a frozen operand many
calls share (the cache), a broadcast value, calls with a priority, and calls that raise
(each error digested with the answers, in call order). ``draw(seed)`` picks a
configuration from the keys of docs/configuration.md: the modules' replication (counts,
names, speeds, migration paths), transport, pickle, spin and coalesce; each interface's
pool, queue and overflow, cache, cache_bytes, prefetch, priority, timeout and
idempotent; each binding's callstyle (sync, async, async-demand(N), async-demand(auto)),
loadratio, balance, aggregate and linger, forward (true, false, "keep"), transport and
timeout; and about one draw in four makes the program's calls 2 or 3 times in one run
(its ``rounds``: a race that shows once in many runs shows sooner), its digest the
baseline's that many times. About one draw in eight is a combination the docs say is refused
(``forward = "keep"`` beside what holds calls at the client, ``balance = "least"`` with a
``loadratio``): it must be refused by ``polybus check``, naming the key.

For a human, from the repository's root::

    .venv/bin/python -m tests.integration.stratmix 50            # seeds 0..49
    .venv/bin/python -m tests.integration.stratmix 20 --first 1000 -v
    .venv/bin/python -m tests.integration.stratmix --seed 17 --show   # one, its --sets

Each run gets 10 s (``--limit``); one that passes it is killed, with its workers, by
their process group. A run must also leave no process of its group and nothing in its
own ``$TMPDIR``. The exit status is the count of combinations that failed (at most 100).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.integration.mixrun import Outcome, run

from polybus.config.overrides import toml_value

APP = Path(__file__).resolve().parent / "apps" / "mix" / "app.toml"
BASELINE = (("modules.s1.replication", 0), ("modules.s2.replication", 0))

DEFINES = {"s1": ("produce", "small"), "s2": ("consume", "matvec", "scaled", "ranked")}
MODULE_OF = {i: m for m, ifaces in DEFINES.items() for i in ifaces}
Override = tuple[str, object]


@dataclass
class Combo:
    seed: int
    overrides: list[Override]
    refused_key: str = ""  # a combination the docs refuse: the key its error names

    def sets(self) -> list[str]:
        return [f"{k}={toml_value(v)}" for k, v in self.overrides]


def _replication(r: random.Random, m: str) -> tuple[object, int, bool]:
    """A module's replication, its replica count, and whether it has migration paths."""
    kind = r.choice(["count", "count", "names", "speeds", "path", "conditions", "ring", "zero"])
    if kind == "count":
        n = r.choice([1, 2, 3])
        return n, n, False
    if kind == "names":
        return f"{m}a,{m}b", 2, False
    if kind == "speeds":
        return f"{m}a:speed=0.5,{m}b", 2, False
    if kind == "path":
        return f"{m}a#{m}b", 2, True
    if kind == "conditions":
        return f"{m}a(oc=(load>=mean+1))#{m}b(uc=(load<mean)):[1/2]", 2, True
    if kind == "ring":
        return f"{m}a#{m}b#{m}c#{m}a", 3, True
    return 0, 0, False



def module_keys(r: random.Random, m: str, out: list[Override]) -> int | None:
    """A module's transport, pickle, spin and coalesce, added to ``out``; the queue bound
    drawn for each of its interfaces (None: the default)."""
    out.append((f"modules.{m}.transport", r.choice(["tcp", "ipc", "shm"])))
    if r.random() < 0.3:
        out.append((f"modules.{m}.pickle", True))
    if r.random() < 0.3:
        out.append((f"modules.{m}.spin", r.choice(["0", "100us", "1ms"])))
    if r.random() < 0.3:
        out.append((f"modules.{m}.coalesce", r.choice(["20us", "1ms"])))
    queue: int | None = r.choice([None, None, 1, 4])  # one bound for the whole module
    return queue


def define_keys(r: random.Random, d: str, queue: int | None, out: list[Override]) -> None:
    """An interface's pool, queue (or overflow = "reject" beside the default queue),
    timeout and idempotent, under its define table ``d``, added to ``out``."""
    if r.random() < 0.4:
        out.append((f"{d}.pool", r.choice([2, "threads:3", "processes:2"])))
    if queue is not None:
        out.append((f"{d}.queue", queue))
    elif r.random() < 0.15:
        out.append((f"{d}.overflow", "reject"))  # never full: 1000 > every call
    if r.random() < 0.15:
        out.append((f"{d}.timeout", "60s"))
    if r.random() < 0.15:
        out.append((f"{d}.idempotent", False))


def call_keys(r: random.Random, u: str, replicas: int, out: list[Override]
              ) -> tuple[str, bool, str]:
    """A binding's callstyle, loadratio (for a sync or async one, of ``replicas`` >= 2)
    and balance (never "least" beside a loadratio), under ``u``, added to ``out``:
    (callstyle, whether a loadratio was drawn, balance)."""
    style = r.choice(["sync", "async", "async", "async-demand(1)", "async-demand(3)",
                      "async-demand(auto)"])
    out.append((f"{u}.callstyle", style))
    ratio = style in ("sync", "async") and replicas >= 2 and r.random() < 0.3
    if ratio:
        shares = [r.choice([1, 2, 3]) for _ in range(replicas)]
        out.append((f"{u}.loadratio", ":".join(map(str, shares))))
    balance = r.choice(["none", "none", "steal", "least"])
    if balance == "least" and ratio:
        balance = "steal"
    if balance != "none":
        out.append((f"{u}.balance", balance))
    return style, ratio, balance


def draw(seed: int) -> Combo:
    """One configuration of the mix program, drawn from ``seed``."""
    r = random.Random(seed)
    out: list[Override] = []
    count: dict[str, int] = {}
    paths: dict[str, bool] = {}
    for m in DEFINES:
        rep, count[m], paths[m] = _replication(r, m)
        out.append((f"modules.{m}.replication", rep))
        queue = module_keys(r, m, out)
        for iface in DEFINES[m]:
            define_keys(r, f"modules.{m}.define.{iface}", queue, out)
    for iface in ("matvec", "scaled"):
        d = f"modules.s2.define.{iface}"
        if iface == "matvec" and r.random() < 0.6:
            out.append((f"{d}.cache", r.choice([["b"], "auto"])))
            if r.random() < 0.4:
                out.append((f"{d}.prefetch", "all"))
        if r.random() < 0.4:
            out.append((f"{d}.cache_bytes", r.choice(["64KiB", "1MiB", "8MiB"])))
    out.append(("modules.s2.define.ranked.priority", r.choice(["w", "-w", "i % 3", "w * 10 - i"])))
    if r.random() < 0.2:
        out.append(("modules.s1.define.small.priority", "i % 4"))
    refused = ""
    held: dict[str, bool] = {}
    steal: dict[str, bool] = {}
    for iface in ("produce", "consume", "small", "matvec", "scaled", "ranked"):
        m, u = MODULE_OF[iface], f"modules.client.use.{iface}"
        style, _, balance = call_keys(r, u, count[m], out)
        agg = r.random() < (0.6 if iface == "small" else 0.2)
        if agg:
            out.append((f"{u}.aggregate", r.choice([1, 4, 64, "2KiB"])))
            if r.random() < 0.5:
                out.append((f"{u}.linger", r.choice(["0", "1ms", "5ms"])))
        fwd = r.choice([None, None, False, "keep"] if iface in ("produce", "matvec") else [None, None, False])
        if fwd is not None:
            out.append((f"{u}.forward", fwd))
        held[iface] = style != "async" or agg or paths[m]
        steal[m] = steal.get(m, False) or balance == "steal"
        if r.random() < 0.2:
            out.append((f"{u}.transport", r.choice(["tcp", "ipc", "shm"])))
        if r.random() < 0.15:
            out.append((f"{u}.timeout", "60s"))
    # forward = "keep" only where the docs take it: a plain async binding, no aggregate,
    # no balance = "steal" on any binding to its module, no migration paths
    for iface in ("produce", "matvec"):
        key = f"modules.client.use.{iface}.forward"
        if (key, "keep") in out and (held[iface] or steal.get(MODULE_OF[iface])):
            out.remove((key, "keep"))
    if r.random() < 0.125:
        refused = _refused(r, out)
    elif r.random() < 0.3:  # the program made 2 or 3 times in one run (a race shows sooner)
        out.append(("modules.client.args", [10, 80, 12, 10, 12, r.choice([2, 3])]))
    return Combo(seed, out, refused)


def features(combo: Combo) -> set[str]:
    """What a combination exercises: each key it sets (by its last part), and for the
    keys whose values differ in kind, the kind (``replication:path``,
    ``callstyle:async-demand(auto)``, ``forward:keep``, ``refused:...forward``)."""
    out = {f"refused:{combo.refused_key.rsplit('.', 1)[1]}"} if combo.refused_key else set()
    for k, v in combo.overrides:
        key = k.rsplit(".", 1)[1]
        out.add(key)
        if key == "replication":
            text = str(v)
            out.add("replication:" + ("conditions" if "oc=" in text else "path" if "#" in text
                                      else "speeds" if "speed" in text else "names"
                                      if isinstance(v, str) else "zero" if v == 0 else "count"))
        elif key == "callstyle":
            out.add("callstyle:" + ("async-demand(N)" if str(v)[-2:-1].isdigit() else str(v)))
        elif key in ("forward", "balance", "transport", "cache"):
            out.add(f"{key}:{v}")
        elif key == "pool":
            out.add("pool:" + ("processes" if "processes" in str(v) else "threads"))
    return out


# Every feature ``draw`` can give, which FIXED covers (test_strategy_mix.py checks it).
ALL_FEATURES = {
    "replication", "replication:count", "replication:names", "replication:speeds",
    "replication:path", "replication:conditions", "replication:zero", "transport",
    "transport:tcp", "transport:ipc", "transport:shm", "pickle", "spin", "coalesce", "pool",
    "pool:threads", "pool:processes", "queue", "overflow", "timeout", "idempotent", "cache",
    "cache:['b']", "cache:auto", "prefetch", "cache_bytes", "priority", "callstyle",
    "callstyle:sync", "callstyle:async", "callstyle:async-demand(N)",
    "callstyle:async-demand(auto)", "loadratio", "balance", "balance:steal", "balance:least",
    "aggregate", "linger", "forward", "forward:False", "forward:keep", "refused:forward",
    "refused:balance", "args"}


def _refused(r: random.Random, out: list[Override]) -> str:
    """Add a combination the docs refuse; the key its error must name."""
    u = "modules.client.use.produce"
    kind = r.choice(["keep+aggregate", "keep+sync", "keep+demand", "keep+steal", "keep+paths",
                     "least+ratio"])
    if kind == "least+ratio":
        out.append((f"{u}.callstyle", "async"))
        out.append(("modules.s1.replication", 2))
        out.append((f"{u}.loadratio", "1:2"))
        out.append((f"{u}.balance", "least"))
        return f"{u}.balance"
    out.append((f"{u}.forward", "keep"))
    if kind == "keep+aggregate":
        out.append((f"{u}.aggregate", 4))
    elif kind == "keep+sync":
        out.append((f"{u}.callstyle", "sync"))
    elif kind == "keep+demand":
        out.append((f"{u}.callstyle", "async-demand(2)"))
    elif kind == "keep+paths":
        out.append(("modules.s1.replication", "s1a#s1b"))
    else:
        out.append((f"{u}.balance", "steal"))
    return f"{u}.forward"


def baseline(limit: float = 20.0) -> Outcome:
    return run(["run", str(APP)], limit, [f"{k}={toml_value(v)}" for k, v in BASELINE])


def check(combo: Combo, want: Outcome, limit: float = 10.0, extra_sets: Sequence[str] = ()
          ) -> str:
    """'' if the combination behaves as the docs say, else what went wrong;
    ``extra_sets`` are given to its run (or check) after the combination's own."""
    sets = [*combo.sets(), *extra_sets]
    if combo.refused_key:
        got = run(["check", str(APP), "--no-import"], limit, sets)
        if got.rc == 0 or combo.refused_key not in got.stderr:
            return f"not refused naming {combo.refused_key} (rc {got.rc}):\n{got.stderr[-2000:]}"
        return ""
    return judge(combo, want, run(["run", str(APP)], limit, sets), limit)


def judge(combo: Combo, want: Outcome, got: Outcome, limit: float) -> str:
    """'' if ``got``, the combination's run, gave ``want``'s answers and left nothing."""
    problems = [f"still running after {limit:g} s"] if got.rc is None else (
        [f"exit status {got.rc}"] if got.rc != 0 else [])
    if got.rc == 0 and got.digest != "+".join([want.digest] * _rounds(combo)):
        diff = [f"{a} (want {b})" for a, b in zip(got.entries, want.entries * _rounds(combo),
                                                  strict=False) if a != b]
        problems.append(f"digest {got.digest}, want {want.digest}; first differing: {diff[:4]}")
    problems += [f"left behind: {got.left}"] if got.left else []
    return "; ".join(problems) + f"\n{got.stderr[-3000:]}" if problems else ""


def _rounds(combo: Combo) -> int:
    """How many times the combination's program makes its calls (client.main's rounds)."""
    args = dict(combo.overrides).get("modules.client.args")
    return args[5] if isinstance(args, list) and len(args) > 5 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.integration.stratmix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", nargs="?", type=int, default=20, help="combinations to run")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this seed alone")
    ap.add_argument("--limit", type=float, default=10.0, help="seconds a run may take")
    ap.add_argument("--show", action="store_true", help="print each combination's --sets")
    ap.add_argument("-v", action="store_true", help="a line for each combination")
    a = ap.parse_args(argv)
    seeds = [a.seed] if a.seed is not None else list(range(a.first, a.first + a.n))
    if (want := baseline()).rc != 0 or not want.digest:
        print(f"the baseline failed (rc {want.rc}):\n{want.stderr}", file=sys.stderr)
        return 100
    failed = 0
    for seed in seeds:
        combo = draw(seed)
        if a.show:
            print(f"seed {seed}: " + " ".join(f"--set '{s}'" for s in combo.sets()))
        t0 = time.monotonic()
        if why := check(combo, want, a.limit):
            failed += 1
            print(f"seed {seed}: FAILED: {why}", flush=True)
        elif a.v:
            kind = f"refused ({combo.refused_key})" if combo.refused_key else "same answers"
            print(f"seed {seed}: {kind}, {time.monotonic() - t0:.1f} s", flush=True)
    print(f"{len(seeds)} combination(s), {failed} failed", file=sys.stderr)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
