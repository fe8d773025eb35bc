"""Random combinations of every strategy (stratmix.py's draws), each run with one replica
SIGKILLed partway through, checked against the client alone as docs/reliability.md
promises.

``draw(seed)`` takes stratmix's combination for that seed (one the docs refuse is not
run here: stratmix checks it) and, of its modules with two replicas or more, picks one;
the run's served functions note each call they begin (``$MIX_MARKS``: ``pid ppid name
token i``, tests/integration/apps/mix/server.py) and take ``$MIX_PAUSE`` seconds, so that
the run lasts; the module's call that is the drawn count's waits (``$MIX_HOLD``) while
the replica that began it (the worker whose ``--as`` is that module, by its pid or its
process pool's parent) is SIGKILLed: a call is running there as it dies. Its answers do
not change: only what else is under way then is left to timing.

What a run must then do (reliability.md, "Delivery and execution", "Forwarded values
that never come"): the client goes on with the replicas left, and every call lost with
the replica runs again (an idempotent interface: the default), a forwarded value lost
with it is computed again or sent from where it is kept: the same digest as the client
alone. A call of an interface with ``idempotent = false`` held by that replica may fail
instead, with ``WorkerDiedError``: its entry, or a consumer's of its value (a
``RemoteException`` of that remote type), is that error, or the program ends on it
(the run fails, naming the call). Never a hang (``--limit``), never another error, and
no process of its group, nothing in its ``$TMPDIR`` or new in /dev/shm left (a name
polybus or a process pool's multiprocessing would give).

For a human, from the repository's root::

    .venv/bin/python -m tests.integration.chaosmix 100               # seeds 0..99
    .venv/bin/python -m tests.integration.chaosmix 50 --first 1000 -v
    .venv/bin/python -m tests.integration.chaosmix --seed 17 --show  # one, its --sets
    .venv/bin/python -m tests.integration.chaosmix 50 --tls -v       # with mutual TLS on
    .venv/bin/python -m tests.integration.chaosmix 50 --by-hand -v   # workers by hand

The exit status is the count of draws that failed (at most 100).
"""

from __future__ import annotations

import argparse
import hashlib
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import stratmix
from .stratmix import APP, DEFINES, MODULE_OF, Combo, Outcome

# calls of each module per round of the program (client.py's defaults): s1 runs 10
# producers and 80 small calls; s2 the consumers of the 8 producers that answer, 12
# matvec, 10 scaled, 12 ranked
CALLS = {"s1": 10 + 80, "s2": 8 + 12 + 10 + 12}


@dataclass
class Kill:
    module: str  # the module one of whose replicas is killed
    after: int  # once this many of its calls have begun: the replica that began the last
    pause: float  # seconds each served call takes ($MIX_PAUSE)
    then: int = 0  # a second replica killed: the one that begins the module's call of this
    # count, or (-1) the one that runs the held call again (chaoskeep.py)
    aim: str = ""  # "f i": kill the replica that ran f(i) instead, none held (chaoskeep.py)


@dataclass
class Chaos:
    combo: Combo
    kill: Kill

    def sets(self) -> list[str]:
        return self.combo.sets()


@dataclass
class Killed:
    """What the watcher did: the replica it killed, or why none."""
    name: str = ""
    pid: int = 0
    calls: int = 0  # calls of the module begun when it did
    why_not: str = ""
    second: str = ""  # the second replica killed (Kill.then), or why none
    second_pid: int = 0
    notes: list[str] = field(default_factory=list)


def replicas(combo: Combo, module: str) -> int:
    """How many replicas the combination gives the module."""
    rep = dict(combo.overrides).get(f"modules.{module}.replication", 2)
    if isinstance(rep, int):
        return rep
    return len(set(re.findall(rf"\b{module}[a-z]\b", str(rep))))


def draw(seed: int) -> Chaos | None:
    """stratmix's combination for ``seed`` and a replica to kill in its run; None for a
    combination the docs refuse, or one with no module of two replicas or more."""
    combo = stratmix.draw(seed)
    if combo.refused_key:
        return None
    able = [m for m in DEFINES if replicas(combo, m) >= 2]
    if not able:
        return None
    r = random.Random(f"chaosmix {seed}")
    m = r.choice(able)
    total = CALLS[m] * stratmix._rounds(combo)
    return Chaos(combo, Kill(m, r.randint(1, int(total * 0.7)), r.choice([0.0005, 0.002, 0.005])))


def _worker_module(pid: int) -> tuple[str, str]:
    """(module, replica name) of a polybus worker process, from its command line."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "", ""
    words = [a.decode(errors="replace") for a in argv]
    if "worker" not in words or "--as" not in words or "--name" not in words:
        return "", ""
    return words[words.index("--as") + 1], words[words.index("--name") + 1]


def killer(kill: Kill, marks: Path, done: Killed, limit: float,
           defines: dict[str, tuple[str, ...]] = DEFINES
           ) -> Callable[[subprocess.Popen[str]], None]:
    """The watch beside a run (on a thread of its own): SIGKILLs the replica of ``kill.module`` that begins
    its ``kill.after``-th call (of the interfaces ``defines`` gives it), and says what it
    did in ``done``."""
    names = set(defines[kill.module])

    def rows(p: subprocess.Popen[str], deadline: float, enough: Callable[[list[list[str]]], bool]
             ) -> list[list[str]] | None:
        while p.poll() is None and time.monotonic() < deadline:
            try:
                lines = marks.read_text().splitlines()
            except OSError:
                lines = []
            mine = [w for w in map(str.split, lines) if len(w) == 5 and w[2] in names]
            if enough(mine):
                return mine
            time.sleep(0.002)
        return None

    def kill_one(row: list[str], spare: int) -> tuple[str, int, str]:
        """SIGKILL the replica that began the call ``row``: (its name, pid, or why not)."""
        for q in (int(row[0]), int(row[1])):
            module, name = _worker_module(q)
            if module == kill.module and q != spare:
                try:
                    os.kill(q, signal.SIGKILL)
                except ProcessLookupError:
                    return "", 0, f"{name} (pid {q}) had ended"
                return name, q, ""
        return "", 0, f"no live replica of {kill.module} at pid {row[0]} or {row[1]}"

    def watch(p: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + limit
        def victim(m: list[list[str]]) -> list[str] | None:
            if len(m) < kill.after:
                return None
            return next((w for w in m if w[2::2] == kill.aim.split()), None) if kill.aim \
                else m[kill.after - 1]
        mine = rows(p, deadline, lambda m: victim(m) is not None)
        if mine is None:
            done.why_not = f"the run ended with {kill.module}'s calls short of {kill.after}"
            return
        done.name, done.pid, done.why_not = kill_one(victim(mine) or [], 0)
        done.calls = len(mine)
        if not done.name or not kill.then:
            return
        held = mine[kill.after - 1]
        if kill.then > 0:
            def at(m: list[list[str]]) -> list[str] | None:
                return m[kill.then - 1] if len(m) >= kill.then else None
        else:
            def at(m: list[list[str]]) -> list[str] | None:
                return next((w for w in m[kill.after:] if w[2::2] == held[2::2]), None)
        again = rows(p, deadline, lambda m: at(m) is not None)
        if again is None:
            done.second = "none: the run ended first"
            return
        name, done.second_pid, why = kill_one(at(again) or [], done.pid)
        done.second = name or why

    return watch


# What a run could leave in /dev/shm: polybus names nothing there (its segments are
# memfds), a process pool's semaphores and shared memory are multiprocessing's. (Other
# programs' files, made there meanwhile, are not looked at, nor one a live process maps.
# Another run's process pool, beside this one, can still make a false alarm here: its
# semaphores outlive their last mapping for a moment; run such a seed again alone.)
_SHM_OURS = ("polybus", "sem.mp-", "psm_", "wnsm_")


def _dev_shm() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(_SHM_OURS) or "polybus" in n}
    except OSError:
        return set()


def _mapped(names: set[str]) -> set[str]:
    """Those of ``names`` in /dev/shm that a live process maps: in use (another run's,
    beside this one), not left."""
    if not names:
        return set()
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                maps = (d / "maps").read_text()
            except OSError:
                continue
            out |= {n for n in names if f"/dev/shm/{n}" in maps}
    return out


def run(chaos: Chaos, limit: float, by_hand: bool = False) -> tuple[Outcome, Killed]:
    """The draw's run, its kill made beside it; ``by_hand``: at a registry and workers
    started by hand (tlsmix.py), the folder of each one killed (its sockets', in their
    ``$TMPDIR``, which none is left to remove) not counted as left behind."""
    marks_dir = Path(tempfile.mkdtemp(prefix="cmx-", dir="/tmp"))
    marks = marks_dir / "marks"
    done = Killed()
    before = _dev_shm()
    watch = killer(chaos.kill, marks, done, limit)
    watchers: list[threading.Thread] = []

    def started(p: subprocess.Popen[str]) -> None:  # (beside the run, on a thread)
        watchers.append(threading.Thread(target=watch, args=(p,), daemon=True))
        watchers[-1].start()

    env = {"MIX_MARKS": str(marks), "MIX_PAUSE": f"{chaos.kill.pause:g}",
           "MIX_HOLD": "" if chaos.kill.aim else f"{','.join(DEFINES[chaos.kill.module])}:{chaos.kill.after}",
           "MIX_HOLD_AGAIN": "1" if chaos.kill.then < 0 else ""}
    try:
        if by_hand:
            from . import tlsmix

            got = tlsmix.run_by_hand(tlsmix.Draw(chaos.combo, False, True), None, limit,
                                     env_add=env, started=started)
        else:
            got = stratmix.run(["run", str(APP)], limit, chaos.sets(), env_add=env, started=started)
        for w in watchers:  # (each ends with the run: what it did is in `done`)
            w.join()
        seen: dict[tuple[str, ...], int] = {}  # the calls that ran again (rounds=1)
        for w in (ln.split() for ln in marks.read_text().splitlines() if marks.exists()):
            seen[tuple(w[2::2])] = seen.get(tuple(w[2::2]), 0) + 1
        done.notes += [f"{n}({i})x{k}" for (n, i), k in seen.items() if k > 1]
    finally:
        shutil.rmtree(marks_dir, ignore_errors=True)
    new = _dev_shm() - before
    deadline = time.monotonic() + 5  # (a resource tracker unlinks what its pool left)
    while new and time.monotonic() < deadline:
        time.sleep(0.05)
        new = {n for n in new if os.path.exists(f"/dev/shm/{n}")}
    got.left += [f"/dev/shm/{n}" for n in sorted(new - _mapped(new))]
    dead = tuple(f"$TMPDIR of the workers: polybus-{pid}-" for pid in (done.pid, done.second_pid)
                 if pid)
    got.left = [x for x in got.left if not (dead and x.startswith(dead))]
    return got, done


def _failed_entry(label: str) -> str:
    """The entry client.py digests for a call that failed with a ``RemoteException`` of
    remote type ``WorkerDiedError``."""
    e: tuple[str, tuple[str, str, list[str]]] = (label, ("error", "WorkerDiedError", []))
    return f"{label}={hashlib.sha256(repr(e).encode()).hexdigest()[:10]}"


def may_fail(chaos: Chaos) -> set[str]:
    """The interfaces whose calls the kill may fail (``WorkerDiedError``): those of the
    killed module with ``idempotent = false``, and ``consume`` beside a ``produce`` so."""
    out = {i for i in DEFINES[chaos.kill.module]
           if (f"modules.{MODULE_OF[i]}.define.{i}.idempotent", False) in chaos.combo.overrides}
    if "produce" in out:
        out.add("consume")
    return out


def _died_naming(stderr: str, ifaces: set[str]) -> bool:
    """Whether the run ended on a WorkerDiedError naming a call of one of ``ifaces``
    (``f(3)``, or ``a batch of 12 calls to f``)."""
    said = re.search(r"^polybus run: error: WorkerDiedError: (.*)$", stderr, re.M)
    return said is not None and any(re.search(rf"\b{i}\b", said.group(1)) for i in ifaces)


def check(chaos: Chaos, want: Outcome, limit: float = 20.0,
          by_hand: bool = False) -> tuple[str, Killed]:
    """('' if the run behaves as reliability.md says, else what went wrong; the kill)."""
    got, done = run(chaos, limit, by_hand)
    problems = []
    fail_ok = may_fail(chaos)
    rounds = stratmix._rounds(chaos.combo)
    if got.rc is None:
        problems.append(f"still running after {limit:g} s")
    elif got.rc != 0:
        if not _died_naming(got.stderr, fail_ok):
            problems.append(f"exit status {got.rc}")
    elif got.digest != "+".join([want.digest] * rounds):
        bad = [f"{a} (want {b})" for a, b in zip(got.entries, want.entries * rounds, strict=False)
               if a != b and not (a.split("(", 1)[0] in fail_ok
                                  and a == _failed_entry(a.split("=", 1)[0]))]
        if bad or len(got.entries) != len(want.entries) * rounds:
            problems.append(f"digest {got.digest}, want {want.digest}; first differing: {bad[:4]}")
    if got.left:
        problems.append(f"left behind: {got.left}")
    if problems:
        return "; ".join(problems) + f" [killed: {done.name or done.why_not}{', then ' + done.second if done.second else ''}]\n{got.stderr[-3000:]}", done
    return "", done


def kill_features(chaos: Chaos) -> set[str]:
    """What a draw's kill exercises: the module killed, and what its replicas and the
    bindings to them were given (the kinds ``stratmix.features`` names, of that module's
    keys alone), ``may-fail`` beside an interface with ``idempotent = false``, and
    ``forwarded`` where the killed replicas ran producers whose values go on to ``s2``
    (not ``forward = false``)."""
    m = chaos.kill.module
    mine = [(k, v) for k, v in chaos.combo.overrides
            if k.startswith(f"modules.{m}.") or (k.startswith("modules.client.use.")
                                                 and MODULE_OF.get(k.split(".")[3]) == m)]
    out = {f"kill:{m}"} | stratmix.features(Combo(chaos.combo.seed, mine))
    if may_fail(chaos):
        out.add("may-fail")
    if m == "s1" and ("modules.client.use.produce.forward", False) not in chaos.combo.overrides:
        out.add("forwarded")
    if stratmix._rounds(chaos.combo) > 1:
        out.add("rounds")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.integration.chaosmix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", nargs="?", type=int, default=20, help="seeds to try")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this seed alone")
    ap.add_argument("--limit", type=float, default=20.0, help="seconds a run may take")
    ap.add_argument("--show", action="store_true", help="print each draw's --sets and kill")
    ap.add_argument("-v", action="store_true", help="a line for each draw")
    ap.add_argument("--tls", action="store_true", help="with [cluster] tls on (tlsmix.py)")
    ap.add_argument("--by-hand", action="store_true",
                    help="at a registry and workers started by hand (tlsmix.py)")
    a = ap.parse_args(argv)
    pki = None
    if a.tls:
        from . import tlsmix

        pki = tlsmix.make_pki(Path(tempfile.mkdtemp(prefix="cmx-pki-")) / "pki")
    seeds = [a.seed] if a.seed is not None else list(range(a.first, a.first + a.n))
    want = stratmix.baseline()
    if want.rc != 0 or not want.digest:
        print(f"the baseline failed (rc {want.rc}):\n{want.stderr}", file=sys.stderr)
        return 100
    failed = ran = killed = 0
    for seed in seeds:
        chaos = draw(seed)
        if chaos is None:
            if a.v:
                print(f"seed {seed}: not drawn (refused, or no module of 2 replicas)")
            continue
        if pki is not None:
            chaos.combo = tlsmix.with_tls(chaos.combo, pki)
        if a.show:
            print(f"seed {seed}: kill {chaos.kill}: " + " ".join(f"--set '{s}'" for s in chaos.sets()))
        t0 = time.monotonic()
        why, done = check(chaos, want, a.limit, a.by_hand)
        ran += 1
        killed += bool(done.name)
        if why:
            failed += 1
            print(f"seed {seed}: FAILED: {why}", flush=True)
        elif a.v:
            what = f"killed {done.name} at call {done.calls}" if done.name else done.why_not
            print(f"seed {seed}: {what}; as documented, {time.monotonic() - t0:.1f} s", flush=True)
    if pki is not None:
        shutil.rmtree(pki.parent, ignore_errors=True)
    print(f"{ran} draw(s) run, {killed} with a replica killed, {failed} failed", file=sys.stderr)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
