"""Random combinations of every strategy a served module and its routes take, under
`polybus serve`: requests sent to the front door, each response checked against the
handler called in this process (servehttp.py).

The program is ``tests/integration/apps/servemix``: two modules (``w1``, ``w2``) serving
one file of handlers, eight routes (text, JSON, bytes of 96 KiB, a response tuple, None,
a numpy array, HTML, handlers that raise, a prefix route, a priority that reads the
query, a body the replica may cache). ``draw(seed)`` picks, with stratmix.py's drawing
code: each module's replication (counts, names, speeds, migration paths), transport,
pickle, spin, coalesce; each interface's pool, queue, overflow (``"reject"`` beside a
bounded queue too: a 503 is then an expected answer of that module's routes), timeout,
idempotent; the priorities (one reads ``query['t']``, which some requests lack: their 400
is expected); ``cache`` of the digest's body; each route's callstyle, loadratio, balance,
timeout, transport; ``[serve] max_connections`` (fewer than the clients at times); and
about one draw in four ``[cluster] tls`` (with ``--tls``: tlsmix.py's certificates).
About one draw in ten is a combination the docs refuse (a route to a module of
replication 0; ``aggregate`` or ``forward`` in a route; ``balance = "least"`` beside a
``loadratio``; a loadratio of the wrong length): ``polybus check`` must refuse it,
saying why. Half the draws add clients that hang up (a close or a reset) while their
request runs (a 3 s handler): serve must say each was abandoned by its client, and serve
every other request as before.

Each run: `polybus serve` at a free port, the draw's requests sent over 1 to 6
connections at once (kept alive, closed after each, HTTP/1.0, pipelined), then SIGTERM:
it must exit 143, say no fault of its own, and leave no process of its group, nothing
in its ``$TMPDIR`` or /dev/shm.

``--kill``: each draw also SIGKILLs the worker that runs a chosen call of one module,
mid-request (chaosmix.py's killer; the call held until it dies). reliability.md: the
call runs again elsewhere, or on the worker serve starts again, and its request gets
its answer; one of an interface with ``idempotent = false`` may get a 502 (the
``WorkerDiedError``). Serve says the replica was lost.

For a human, from the repository's root::

    .venv/bin/python -m tests.integration.servemix 50             # seeds 0..49
    .venv/bin/python -m tests.integration.servemix 50 --kill -v
    .venv/bin/python -m tests.integration.servemix --seed 17 --show

The exit status is the count of draws that failed (at most 100).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import chaosmix, servehttp, stratmix
from .servehttp import ROUTE_KEY, Clients
from .stratmix import Combo, Outcome, Override

APP = Path(__file__).resolve().parent / "apps" / "servemix" / "app.toml"
START_S = 60.0  # for serve to start its workers and answer (not counted in a run's limit)
DEFINES: dict[str, tuple[str, ...]] = {"w1": ("square", "echo", "blob", "slow"),
                                       "w2": ("ranked", "digest", "shaped", "files")}
MODULE_OF = {i: m for m, ifaces in DEFINES.items() for i in ifaces}


@dataclass
class Draw:
    combo: Combo
    refused_why: str = ""  # what `check` must say of a refused combination
    hangups: int = 0  # clients that hang up mid-request
    kill: chaosmix.Kill | None = None
    tls: bool = False
    stop: str = ""  # SIGTERM once half the requests are answered: to "serve", or its "group"

    def option(self, key: str) -> object:
        return dict(self.combo.overrides).get(key)


def _route(iface: str) -> str:
    return f'serve.routes."{ROUTE_KEY[iface]}"'


def draw(seed: int, kill: bool = False, tls: bool = False) -> Draw:
    """The combination for ``seed``; ``kill``: with a replica to kill mid-request;
    ``tls``: TLS drawn one time in four (the caller adds the certificates)."""
    r = random.Random(f"servemix {seed}")
    out: list[Override] = []
    count: dict[str, int] = {}
    why = ""
    for m in DEFINES:
        rep, count[m], _ = stratmix._replication(r, m)
        if count[m] == 0 and (kill or r.random() < 0.5):
            rep, count[m] = 1, 1
        out.append((f"modules.{m}.replication", rep))
        if count[m] == 0:
            why = "has replication = 0"
        queue = stratmix.module_keys(r, m, out)
        reject = queue is not None and r.random() < 0.3  # (a 503 is then expected)
        for iface in DEFINES[m]:
            table = f"modules.{m}.define.{iface}"
            stratmix.define_keys(r, table, queue, out)
            if reject:
                out.append((f"{table}.overflow", "reject"))
    out.append(("modules.w2.define.ranked.priority",
                r.choice(["len(query['p'])", "-len(query['p'])", "len(query['i'])"])))
    if r.random() < 0.25:
        out.append(("modules.w1.define.echo.priority", "len(query['t'])"))
    if r.random() < 0.6:
        out.append(("modules.w2.define.digest.cache", r.choice([["body"], "auto"])))
    if r.random() < 0.3:
        out.append(("modules.w2.define.digest.cache_bytes", r.choice(["64KiB", "1MiB"])))
    for iface in ROUTE_KEY:
        u = _route(iface)
        stratmix.call_keys(r, u, count[MODULE_OF[iface]], out)
        if r.random() < 0.15:
            out.append((f"{u}.timeout", "60s"))
        if r.random() < 0.2:
            out.append((f"{u}.transport", r.choice(["tcp", "ipc", "shm"])))
    if r.random() < 0.3:
        out.append(("serve.max_connections", r.choice([2, 4])))
    if not why and not kill and r.random() < 0.1:
        why = _refused(r, out)
    d = Draw(Combo(seed, out, "serve.refused" if why else ""), why,
             r.choice([0, 1, 2, 3]) if not kill else 0, tls=tls and r.random() < 0.25)
    if kill:
        d.kill = _kill(seed, d)
        d.hangups = random.Random(f"servemix kill hang-ups {seed}").choice([0, 0, 1, 2])
    elif not why and r.random() < 0.25:  # (a stop with requests in flight; no hang-ups)
        d.stop, d.hangups = r.choice(["serve", "group"]), 0
    if r.random() < 0.3:  # (shorter than the 0.6 s of two /slow requests: their 504s)
        out.append((f"{_route('slow')}.timeout", "0.3s"))
    return d


def _refused(r: random.Random, out: list[Override]) -> str:
    """Add a combination the docs refuse; what `check`'s error says."""
    u = _route("square")
    kind = r.choice(["aggregate", "forward", "least+ratio", "ratio-length"])
    if kind in ("aggregate", "forward"):
        out.append((f"{u}.{kind}", 4 if kind == "aggregate" else False))
        return f"{u}.{kind}: unknown key '{kind}'"
    out.append(("modules.w1.replication", 2))
    out.append((f"{u}.callstyle", "async"))
    if kind == "ratio-length":
        out.append((f"{u}.loadratio", "1:2:1"))
        return "the load ratio has 3 shares but module 'w1' has 2 replicas"
    out.append((f"{u}.loadratio", "1:2"))
    out.append((f"{u}.balance", "least"))
    return f"{u}.balance: balance = \"least\""


def _calls(d: Draw, module: str) -> int:
    """How many of the draw's requests call ``module`` (a 400 calls nothing)."""
    reads = priority_reads(d)
    routed = [(q, q.route()) for q in servehttp.requests(d.combo.seed)]
    return sum(1 for q, t in routed if t is not None and t[0] == module
               and (t[1] not in reads or reads[t[1]] in dict(q.query)))


def _kill(seed: int, d: Draw) -> chaosmix.Kill:
    r = random.Random(f"servemix kill {seed}")
    m = r.choice(list(DEFINES))
    return chaosmix.Kill(m, r.randint(1, max(1, int(_calls(d, m) * 0.7))),
                         r.choice([0.0005, 0.002, 0.005]), then=-1 if r.random() < 0.3 else 0)


def late(d: Draw) -> float | None:
    """The /slow route's timeout, where a short one was drawn."""
    return 0.3 if d.option(f"{_route('slow')}.timeout") == "0.3s" else None


def priority_reads(d: Draw) -> dict[str, str]:
    """The query key each handler's priority reads, where a request may lack it."""
    return {"echo": "t"} if d.option("modules.w1.define.echo.priority") else {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Ran:
    out: Outcome
    clients: Clients
    reqs: list[servehttp.Req]
    hung: dict[int, bool]  # each hang-up's n: whether its handler had begun
    killed: chaosmix.Killed


def run(d: Draw, limit: float, pki: Path | None = None) -> Ran:
    """The draw's serve, its requests (and hang-ups, and kill) beside it, then SIGTERM."""
    from . import tlsmix

    marks_dir = Path(tempfile.mkdtemp(prefix="svx-", dir="/tmp"))
    marks = marks_dir / "marks"
    port = _free_port()
    reqs = servehttp.requests(d.combo.seed)
    clients = Clients.draw(d.combo.seed, len(reqs))
    hung: dict[int, bool] = {}
    done = chaosmix.Killed()
    drivers: list[threading.Thread] = []
    combo = tlsmix.with_tls(d.combo, pki) if d.tls and pki is not None else d.combo

    def hang(n: int) -> None:
        try:
            hung[n] = servehttp.hang_up(port, n, marks, limit - 5, clients.quit)
        except OSError:  # (serve never listened: its exit status says why)
            hung[n] = False

    finished = threading.Event()  # every request sent and answered, the hang-ups made

    def stop(p: subprocess.Popen[str]) -> None:
        """SIGTERM (to serve, or to its process group: systemd's way): with ``d.stop``,
        once half the requests are answered (the clients then dial no more); else once
        all are."""
        (clients.halfway if d.stop else finished).wait(limit - 4)
        if d.stop:
            clients.quit.set()
        if p.poll() is not None:
            return
        if d.stop == "group":
            os.killpg(p.pid, signal.SIGTERM)  # (the group stratmix.run made)
        else:
            p.send_signal(signal.SIGTERM)

    def started(p: subprocess.Popen[str]) -> None:
        watch = chaosmix.killer(d.kill, marks, done, START_S + limit, DEFINES) if d.kill else None

        def drive() -> None:
            if not servehttp.ready(port, START_S, clients.quit):
                return  # (serve ended, or never answered: its exit status, or the limit)
            side = [threading.Thread(target=hang, args=(1002 + h,)) for h in range(d.hangups)]
            if watch is not None:
                side.append(threading.Thread(target=watch, args=(p,)))
            for t in side:
                t.start()
            stopper = threading.Thread(target=stop, args=(p,))
            stopper.start()
            clients.send_all(port, reqs, limit - 4)
            for t in side[:d.hangups]:
                t.join()
            finished.set()
            clients.halfway.set()  # (a stop not made yet: now)
            stopper.join()
            for t in side[d.hangups:]:
                t.join()

        drivers.append(threading.Thread(target=drive, daemon=True))
        drivers[-1].start()

    kill = d.kill
    env = {"MIX_MARKS": str(marks), "MIX_PAUSE": f"{kill.pause:g}" if kill else "",
           "MIX_HOLD": f"{','.join(DEFINES[kill.module])}:{kill.after}" if kill else "",
           "MIX_HOLD_AGAIN": "1" if kill and kill.then < 0 else ""}
    before = chaosmix._dev_shm()
    try:
        got = stratmix.run(["serve", str(APP), "--listen", f"127.0.0.1:{port}"],
                           START_S + limit, combo.sets(), env_add=env, started=started)
        clients.quit.set()
        for t in drivers:
            t.join(START_S + limit)
    finally:
        clients.quit.set()
        shutil.rmtree(marks_dir, ignore_errors=True)
    new = chaosmix._dev_shm() - before
    deadline = time.monotonic() + 5
    while new and time.monotonic() < deadline:
        time.sleep(0.05)
        new = {n for n in new if Path(f"/dev/shm/{n}").exists()}
    got.left += [f"/dev/shm/{n}" for n in sorted(new - chaosmix._mapped(new))]
    dead = tuple(f"$TMPDIR of the workers: polybus-{pid}-" for pid in (done.pid, done.second_pid)
                 if pid)
    got.left = [x for x in got.left if not (dead and x.startswith(dead))]
    return Ran(got, clients, reqs, hung, done)


def check(d: Draw, limit: float = 20.0, pki: Path | None = None) -> tuple[str, Ran | None]:
    """('' if the draw behaves as the docs say, else what went wrong; its run, None for
    a refused one)."""
    if d.refused_why:
        got = stratmix.run(["check", str(APP), "--no-import"], limit, d.combo.sets())
        if got.rc == 0 or d.refused_why not in got.stderr:
            return (f"not refused saying {d.refused_why!r} (rc {got.rc}):\n"
                    f"{got.stderr[-2000:]}"), None
        return "", None
    from .servejudge import judge  # (which reads this module's draws)

    ran = run(d, limit, pki)
    return judge(d, ran, limit), ran


def features(d: Draw) -> set[str]:
    """What a draw exercises: stratmix's kinds of each key it sets, the refusal, TLS,
    hang-ups, the kind of each client connection, the kill."""
    out = stratmix.features(d.combo) - {"refused:refused"}
    if d.refused_why:
        return out | {"refused"}
    out |= {f"conn:{k}" for k, _ in Clients.draw(d.combo.seed, 1).conns}
    out |= {"tls"} if d.tls else set()
    out |= {"hangup"} if d.hangups else set()
    out |= {f"kill:{d.kill.module}"} if d.kill else set()
    out |= {f"stop:{d.stop}"} if d.stop else set()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.integration.servemix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", nargs="?", type=int, default=20, help="draws to run")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this seed alone")
    ap.add_argument("--limit", type=float, default=20.0, help="seconds a run may take")
    ap.add_argument("--kill", action="store_true", help="a worker SIGKILLed mid-request")
    ap.add_argument("--tls", action="store_true", help="TLS in one draw of four (needs openssl)")
    ap.add_argument("--show", action="store_true", help="print each draw's --sets")
    ap.add_argument("-v", action="store_true", help="a line for each draw")
    a = ap.parse_args(argv)
    pki = None
    if a.tls:
        from . import tlsmix

        pki = tlsmix.make_pki(Path(tempfile.mkdtemp(prefix="svx-pki-")) / "pki")
    seeds = [a.seed] if a.seed is not None else list(range(a.first, a.first + a.n))
    failed = 0
    for seed in seeds:
        d = draw(seed, a.kill, a.tls)
        if a.show:
            print(f"seed {seed}: tls {d.tls}, hang-ups {d.hangups}, kill {d.kill}, stop {d.stop}, "
                  f"clients {Clients.draw(seed, 1).conns and [k for k, _ in Clients.draw(seed, 1).conns]}: "
                  + " ".join(f"--set '{s}'" for s in d.combo.sets()), flush=True)
        t0 = time.monotonic()
        why, ran = check(d, a.limit, pki)
        from .servejudge import said
        if why:
            failed += 1
            print(f"seed {seed}: FAILED: {why}", flush=True)
        elif a.v:
            print(f"seed {seed}: as documented ({said(d, ran)}), {time.monotonic() - t0:.1f} s",
                  flush=True)
    if pki is not None:
        shutil.rmtree(pki.parent, ignore_errors=True)
    print(f"{len(seeds)} draw(s), {failed} failed", file=sys.stderr)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
