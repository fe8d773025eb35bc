"""Random combinations of every strategy (stratmix.py's draws) at a registry and workers
started by hand (tlsmix.py), with the shared registry, the client, or both, killed
mid-run, each checked against docs/reliability.md.

``draw(seed)`` takes stratmix's combination for that seed (one the docs refuse is not
run here) and, from a random stream of its own, what goes mid-run: the registry
(SIGKILL or SIGTERM to its process group), the client (``polybus run``, SIGKILL), or
both, once the run's served functions have begun a drawn number of calls
(``$MIX_MARKS``, each taking ``$MIX_PAUSE`` seconds); and when the registry comes back
on the same address, with the same token: ``soon`` (a drawn pause after its end, the
run still under way) or ``later`` (after the run: the next run first finds none).

What must then be seen (reliability.md, "The registry dies", "The client dies",
"Workers started by hand"):

- the registry gone, the run goes on with the replicas it knows: the client alone's
  answers; a run started while none answers on the address ends at start-up with
  status 2, saying ``no registry answers at``;
- once a registry is back, each worker registers there again (its log says so, and it
  said that it lost the registry, once each) within ``BACK_S``, and the next run gives
  the client alone's answers;
- the client killed (``both``: after the registry), no call of its begins on any worker
  past ``QUIET_S`` after it went (what was queued or unread for it is dropped), the
  workers serve the next run with the client alone's answers, and each worker's
  descriptors and threads come back to what they were after a run that ended well
  (one is run first for that);
- every worker is still running at the end, and all of them, and the registries, end on
  SIGTERM within 5 s leaving nothing in their ``$TMPDIR``; in half the draws that killed
  the registry, it is SIGKILLed again first, and the workers stop without it.

For a human, from the repository's root::

    .venv/bin/python -m tests.integration.chaosreg 50 -v            # seeds 0..49
    .venv/bin/python -m tests.integration.chaosreg --seed 17 --show  # one, its --sets

The exit status is the count of draws that failed (at most 100).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import holdings, stratmix, tlsmix
from .stratmix import Combo, Outcome

QUIET_S = 0.5  # after the client went, no call of its begins past this
BACK_S = 6.0  # a registry back: each worker registered there again within this
STATUS_NO_REGISTRY = 2


@dataclass
class Plan:
    combo: Combo
    what: str  # "registry", "client" or "both"
    sig: int  # the registry's: SIGKILL or SIGTERM
    back: str  # "soon" or "later"
    gap: float  # "soon": seconds between the registry's end and its start again
    after: int  # once this many calls have begun
    pause: float  # seconds each served call takes ($MIX_PAUSE)
    gone_at_end: bool = False  # the registry SIGKILLed again before the workers are stopped

    def __str__(self) -> str:
        reg = f"registry {signal.Signals(self.sig).name}, back {self.back}" + (
            f" after {self.gap:g} s" if self.back == "soon" else "")
        return {"registry": reg, "client": "client SIGKILL", "both": f"{reg}, client SIGKILL"
                }[self.what] + f", at call {self.after}, pause {self.pause:g} s" + (
                    ", registry gone at the end" if self.gone_at_end else "")


def draw(seed: int) -> Plan | None:
    """stratmix's combination for ``seed`` and what to kill in it; None for one the
    docs refuse."""
    combo = stratmix.draw(seed)
    if combo.refused_key:
        return None
    r = random.Random(f"chaosreg {seed}")
    what = r.choice(["registry", "client", "both"])
    plan = Plan(combo, what, r.choice([signal.SIGKILL, signal.SIGTERM]),
                r.choice(["soon", "soon", "later"]), r.choice([0.0, 0.2, 1.0]),
                r.randint(1, 40), r.choice([0.002, 0.01, 0.02]))
    plan.gone_at_end = what != "client" and r.random() < 0.5  # (drawn last: the rest as before)
    return plan


@dataclass
class Seen:
    """What the killer did, and what followed."""

    registry_gone: float = 0.0  # when (monotonic), 0: not killed
    client_gone: float = 0.0
    marks_at_kill: int = 0
    why_not: str = ""
    back_at: str = ""  # the registry started again ("soon"), its address
    notes: list[str] = field(default_factory=list)


def _marks(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except OSError:
        return 0


def _killer(plan: Plan, bh: tlsmix.ByHand, marks: Path, seen: Seen, limit: float
            ) -> tuple[list[threading.Thread], object]:
    threads: list[threading.Thread] = []

    def watch(p: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + limit
        first = _marks(marks)  # (the calls of the runs before)
        while p.poll() is None and time.monotonic() < deadline and _marks(marks) - first < plan.after:
            time.sleep(0.002)
        if p.poll() is not None or time.monotonic() >= deadline:
            seen.why_not = f"the run ended with fewer than {plan.after} calls begun"
            return
        seen.marks_at_kill = _marks(marks) - first
        if plan.what in ("registry", "both"):
            _, reg, _ = bh.hand.procs[0]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(reg.pid, plan.sig)
            reg.wait()
            seen.registry_gone = time.monotonic()
        if plan.what in ("client", "both"):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            seen.client_gone = time.monotonic()
        if plan.what != "client" and plan.back == "soon":
            time.sleep(plan.gap)
            seen.back_at = bh.start_registry("registry-2", bh.registry)

    def started(p: subprocess.Popen[str]) -> None:
        threads.append(threading.Thread(target=watch, args=(p,), daemon=True))
        threads[-1].start()

    return threads, started


def _workers(bh: tlsmix.ByHand) -> list[tuple[str, subprocess.Popen[bytes], Path]]:
    return [w for w in bh.hand.procs if not w[0].startswith("registry")]


def _registered_again(bh: tlsmix.ByHand, log_of: str) -> list[str]:
    """The workers not registered at the registry started again (its log) within BACK_S."""
    names = {what.split(":", 1)[1] for what, _, _ in _workers(bh)}
    log = next(lg for what, _, lg in bh.hand.procs if what == log_of)
    deadline = time.monotonic() + BACK_S
    while True:
        text = log.read_text(errors="replace")
        missing = sorted(n for n in names if not re.search(rf"registry: {re.escape(n)} registered", text))
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.05)


def _worker_said(bh: tlsmix.ByHand, within: float = 2.0) -> list[str]:
    """Each worker that did not say, once each, that it lost the registry and that it
    registered again (``within`` seconds: it says the latter once the registry answered,
    after the registry said it)."""
    deadline = time.monotonic() + within
    while True:
        out = []
        for what, _, log in _workers(bh):
            text = log.read_text(errors="replace")
            lost, again = text.count("lost the registry at"), text.count("registered again")
            if (lost, again) != (1, 1):
                out.append(f"{what} said 'lost the registry' {lost}, 'registered again' "
                           f"{again} times, want once each")
        if not out or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


def run(plan: Plan, want: Outcome, limit: float = 15.0) -> tuple[list[str], Seen]:
    """The draw's runs and checks: what differed from the docs ([] if nothing)."""
    sets = plan.combo.sets()
    work = Path(tempfile.mkdtemp(prefix="crg-", dir="/tmp"))
    marks = work / "marks"
    env = {"MIX_MARKS": str(marks), "MIX_PAUSE": f"{plan.pause:g}",
           "MIX_PROBE": str(work / "probe")}
    problems: list[str] = []
    seen = Seen()
    bh: tlsmix.ByHand | None = None

    def judge(what: str, got: Outcome) -> None:
        if why := stratmix.judge(plan.combo, want, got, limit):
            problems.append(f"{what}: {why}")

    try:
        with tlsmix.hand_started(tlsmix.Draw(plan.combo, False, True), None, env) as bh:
            base: dict[str, holdings.Holding] = {}
            if plan.what != "registry":  # (what a worker holds after a run that ended well)
                judge("the first run", stratmix.run(bh.run_args(), limit, sets, env_add=env))
                time.sleep(0.3)
                base = holdings.holding(_workers(bh), work)
            threads, started = _killer(plan, bh, marks, seen, limit)
            got = stratmix.run(bh.run_args(), limit, sets, env_add=env,
                               started=started)  # type: ignore[arg-type]
            for t in threads:
                t.join()
            if seen.why_not:
                seen.notes.append(seen.why_not)
            if seen.client_gone:
                if got.rc is None:
                    problems.append("the killed client's run was not ended")
                got.left = [x for x in got.left if x.startswith("pid ")]
                problems += [f"the killed client left {x}" for x in got.left]
                time.sleep(max(0.0, seen.client_gone + QUIET_S - time.monotonic()))
                at = _marks(marks)  # (calls begun by QUIET_S after it went)
                time.sleep(1.0)
                if (late := _marks(marks) - at) > 0:
                    problems.append(f"{late} call(s) began more than {QUIET_S:g} s after the "
                                    "client was killed")
            else:
                judge("the run the registry went under", got)
            if seen.registry_gone:
                if plan.back == "later":
                    none = stratmix.run(bh.run_args(), limit, sets, env_add=env)
                    if not _workers(bh):  # (every module in the client: no registry asked)
                        judge("a run with no registry and no worker", none)
                    elif none.rc != STATUS_NO_REGISTRY or "no registry answers at" not in none.stderr:
                        problems.append(f"a run with no registry: exit status {none.rc}, want "
                                        f"{STATUS_NO_REGISTRY} saying 'no registry answers at'"
                                        f"\n{none.stderr[-1500:]}")
                    seen.back_at = bh.start_registry("registry-2", bh.registry)
                if seen.back_at != bh.registry:
                    problems.append(f"the registry did not start again on {bh.registry} "
                                    f"(got {seen.back_at!r})")
                elif missing := _registered_again(bh, "registry-2"):
                    problems.append(f"not registered again within {BACK_S:g} s: {missing}")
                problems += _worker_said(bh)
            nxt = stratmix.run(bh.run_args(), limit, sets, env_add=env)
            judge("the next run", nxt)
            if seen.registry_gone:  # (every worker registered again, and kept so)
                problems += [f"the next run: {ln}" for ln in nxt.stderr.splitlines()
                             if re.search(r"configured \d+ replica\(s\), found", ln)]
                log = next((lg for what, _, lg in bh.hand.procs if what == "registry-2"), None)
                text = log.read_text(errors="replace") if log else ""
                problems += [f"registry-2: {ln}" for ln in text.splitlines() if "dropped" in ln]
            if base:
                problems += holdings.held_back(lambda: _workers(bh), work, base)
                seen.notes += [f"{what} keeps {n} value(s) of clients gone" for what, p, _
                               in _workers(bh) if (n := holdings.probe_of(work, p.pid).get("arrived"))]
            problems += [f"{what} ended (status {p.returncode})" for what, p, _ in _workers(bh)
                         if p.poll() is not None]
            if plan.gone_at_end and seen.registry_gone:  # (the workers then stop without it:
                reg2 = next(p for what, p, _ in bh.hand.procs  # within STOP_S: Hand.stop)
                            if what == "registry-2")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(reg2.pid, signal.SIGKILL)
                reg2.wait()
                time.sleep(1.5)  # (a heartbeat or more finds it gone)
    except tlsmix.StartFailed as exc:
        problems.append(str(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if bh is not None:
        problems += [f"left behind: {x}" for x in bh.left]
        if problems:
            problems.append(bh.said[-5000:])
    return problems, seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.integration.chaosreg", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", nargs="?", type=int, default=20, help="seeds to try")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this seed alone")
    ap.add_argument("--limit", type=float, default=15.0, help="seconds a run may take")
    ap.add_argument("--show", action="store_true", help="print each draw's --sets and kills")
    ap.add_argument("-v", action="store_true", help="a line for each draw")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (started in the background)
    seeds = [a.seed] if a.seed is not None else list(range(a.first, a.first + a.n))
    want = stratmix.baseline()
    if want.rc != 0 or not want.digest:
        print(f"the baseline failed (rc {want.rc}):\n{want.stderr}", file=sys.stderr)
        return 100
    failed = ran = 0
    for seed in seeds:
        plan = draw(seed)
        if plan is None:
            continue
        if a.show:
            print(f"seed {seed}: {plan}: " + " ".join(f"--set '{s}'" for s in plan.combo.sets()))
        t0 = time.monotonic()
        problems, seen = run(plan, want, a.limit)
        ran += 1
        if problems:
            failed += 1
            print(f"seed {seed} ({plan}): FAILED: " + "\n".join(problems), flush=True)
        elif a.v:
            print(f"seed {seed} ({plan}): as documented{'; ' + '; '.join(seen.notes) if seen.notes else ''}, "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
    print(f"{ran} draw(s) run, {failed} failed", file=sys.stderr)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
