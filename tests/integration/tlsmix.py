"""stratmix.py's combinations of every strategy, run (a) with mutual TLS on
(``[cluster] tls``), and (b) against workers started by hand at a registry instead of
the local engine's, each checked against the same program with every module in the
client (replication = 0).

``draw(seed)`` takes stratmix's combination for that seed and adds, from a random stream
of its own (stratmix's draws are unchanged): TLS on or not; and workers by hand or not.
With TLS, each ``transport`` the combination sets is made ``tcp`` two times in three (the
transport TLS covers: ``ipc://`` and ``shm://`` stay local and plain, docs/security.md
"TLS"; the registry's connections are TCP whatever it says). By hand is as its user does
it (docs/reliability.md, "Workers started by hand"): ``polybus registry --config APP``
(its TLS) with a token file, then ``polybus worker --config APP --as MODULE --name
REPLICA --registry ...`` for each replica the combination's ``replication`` names,
given the same ``--set``s, all started at once and waited for (``serving``), then
``polybus run APP --registry ... --token-file ...``. The registry and workers are
stopped afterwards (SIGTERM, their process group) and must end within 5 s, and leave
nothing in the ``$TMPDIR`` they were given (their sockets' private folders); with TLS,
each must have said at start that it listens under mutual TLS. A
combination the docs refuse must still be refused by ``polybus check``, naming its key.

For a human, from the repository's root (needs the ``openssl`` command)::

    .venv/bin/python -m tests.integration.tlsmix 50                    # seeds 0..49
    .venv/bin/python -m tests.integration.tlsmix 200 --tls -v          # TLS on in every draw
    .venv/bin/python -m tests.integration.tlsmix 200 --by-hand --first 500
    .venv/bin/python -m tests.integration.tlsmix --seed 17 --show      # one, its --sets

The exit status is the count of combinations that failed (at most 100).
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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import mixrun, stratmix
from .mixrun import POLYBUS, ROOT
from .stratmix import APP, Combo, Outcome

START_S = 20.0  # for the registry and each worker to say it is up
STOP_S = 5.0  # after SIGTERM, for the registry and workers to end


@dataclass
class Draw:
    combo: Combo
    tls: bool
    by_hand: bool

    def sets(self, pki: Path | None) -> list[str]:
        """The combination's ``--set``s, and its TLS files' (``pki``: where they are)."""
        return self.combo.sets() + ([tls_set(pki)] if self.tls and pki is not None else [])


def tls_set(pki: Path) -> str:
    return (f'cluster.tls={{ cert = "{pki}/node.pem", key = "{pki}/node.key", '
            f'ca = "{pki}/ca.pem" }}')


def draw(seed: int, tls: bool | None = None, by_hand: bool | None = None) -> Draw:
    """stratmix's combination for ``seed``, with TLS and workers by hand drawn (each half
    the time) unless given."""
    r = random.Random(f"tlsmix {seed}")
    on_tls = r.random() < 0.5 if tls is None else tls
    hand = r.random() < 0.5 if by_hand is None else by_hand
    combo = stratmix.draw(seed)
    return Draw(tcp_mostly(combo, r) if on_tls else combo, on_tls, hand)


def tcp_mostly(combo: Combo, r: random.Random) -> Combo:
    """``combo`` with each ``transport`` it sets made ``tcp`` two times in three."""
    return Combo(combo.seed, [(k, "tcp") if k.endswith(".transport") and r.random() < 2 / 3
                              else (k, v) for k, v in combo.overrides], combo.refused_key)


def with_tls(combo: Combo, pki: Path) -> Combo:
    """``combo`` with ``tcp_mostly``'s transports (drawn from its seed) and TLS on
    (chaosmix.py's ``--tls``)."""
    r = random.Random(f"tlsmix tcp {combo.seed}")
    tls = [(f"cluster.tls.{k}", str(pki / f)) for k, f in
           (("cert", "node.pem"), ("key", "node.key"), ("ca", "ca.pem"))]
    return Combo(combo.seed, tcp_mostly(combo, r).overrides + tls, combo.refused_key)


def features(d: Draw) -> set[str]:
    """What a draw exercises: stratmix's features (``stratmix:...``), ``tls`` and the
    transports beside it, ``by-hand`` or ``tls+local``, and of a draw run by hand the
    kinds of value stratmix tells apart (``by-hand+replication:path``, ...)."""
    inner = stratmix.features(d.combo)
    out = {f"stratmix:{f}" for f in inner}
    if d.tls:
        out.add("tls")
        out |= {f"tls+transport:{v}" for k, v in d.combo.overrides if k.endswith(".transport")}
    if d.combo.refused_key:
        return out  # (checked, never run)
    out.add("by-hand" if d.by_hand else "local")
    if d.tls:
        out.add("tls+by-hand" if d.by_hand else "tls+local")
    if d.by_hand:
        out |= {f"by-hand+{f}" for f in inner if ":" in f}
    return out


def make_pki(where: Path) -> Path:
    """A CA and a certificate for 127.0.0.1 signed by it, as docs/security.md makes them."""
    where.mkdir(parents=True, exist_ok=True)

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True,
                       timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ossl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=ca", "-keyout", "ca.key",
         "-out", "ca.pem")
    (where / "node.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                    "extendedKeyUsage=serverAuth,clientAuth\n")
    ossl("req", *ec, "-subj", "/CN=node", "-keyout", "node.key", "-out", "node.csr")
    ossl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", "node.ext", "-out", "node.pem")
    for key in ("ca.key", "node.key"):
        (where / key).chmod(0o600)
    return where


def replicas(sets: list[str]) -> dict[str, list[str]]:
    """Each served module's replica names, as the configuration with ``sets`` gives them."""
    from polybus.config import load

    app = load(APP, tuple(sets))
    return {m: [r.name for r in app.modules[m].replication] for m in stratmix.DEFINES}


@dataclass
class Hand:
    """The registry and workers started by hand for one run."""

    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(self, what: str, argv: list[str], env: dict[str, str], logs: Path) -> None:
        log = logs / f"{what}.log"
        with log.open("wb") as f:
            p = subprocess.Popen([*POLYBUS, *argv], stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.procs.append((what, p, log))

    def wait_for(self, pattern: str, first: int = 0, seconds: float = START_S) -> list[str]:
        """Each process's (from the ``first`` started on) first match of ``pattern`` in
        its output; '' where it ended first or ``seconds`` passed."""
        found: dict[str, str] = {}
        procs = self.procs[first:]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for what, p, log in procs:
                if what not in found and (m := re.search(pattern, log.read_text(errors="replace"))):
                    found[what] = m.group(m.lastindex or 0)
                elif what not in found and p.poll() is not None:
                    found[what] = ""
            if len(found) == len(procs):
                break
            time.sleep(0.02)
        return [found.get(what, "") for what, _, _ in procs]

    def said(self) -> str:
        return "".join(f"--- {what} (status {p.returncode})\n{log.read_text(errors='replace')}"
                       for what, p, log in self.procs)

    def stop(self) -> list[str]:
        """SIGTERM each one's process group, then SIGKILL what is left after STOP_S:
        what had to be killed."""
        for _, p, _ in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_S
        left = []
        for what, p, _ in self.procs:
            while (pids := mixrun._group(p.pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pids:
                left.append(f"{what}: pids {pids} still there {STOP_S:g} s after SIGTERM")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=STOP_S)
        return left


class StartFailed(Exception):
    """The registry or a worker by hand did not start (or, under TLS, did not say so)."""


@dataclass
class ByHand:
    """A registry and workers started by hand (`hand_started`): what a run is given to use
    them, and, once they ended, what they left and said."""

    hand: Hand
    registry: str  # HOST:PORT
    token: Path
    env: dict[str, str]
    config: list[str]  # --config APP and the draw's --sets
    left: list[str] = field(default_factory=list)
    said: str = ""

    def run_args(self) -> list[str]:
        return ["run", str(APP), "--registry", self.registry, "--token-file", str(self.token)]

    def start_registry(self, what: str, listen: str = "127.0.0.1:0") -> str:
        """Start (again) a registry on ``listen``: its HOST:PORT once it listens, '' if
        it did not within START_S."""
        self.hand.start(what, ["registry", "--listen", listen, "--token-file",
                               str(self.token), *self.config], self.env, self.token.parent)
        [at] = self.hand.wait_for(r"listening on (?:tcp://)?(\S+)", first=len(self.hand.procs) - 1)
        return at


@contextlib.contextmanager
def hand_started(d: Draw, pki: Path | None, env_add: dict[str, str] | None = None
            ) -> Iterator[ByHand]:
    """The combination's registry and workers started by hand (their own ``$TMPDIR``),
    each worker waited for; StartFailed if one did not start. On the way out each is
    stopped (`Hand.stop`) and ``left`` says what had to be killed and what is left in
    their ``$TMPDIR``; ``said`` is what they printed."""
    sets = d.sets(pki)
    work = Path(tempfile.mkdtemp(prefix="hmx-", dir="/tmp"))
    tmp = work / "tmp"
    tmp.mkdir()
    token = work / "token"
    token.write_text(os.urandom(24).hex() + "\n")
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k != "POLYBUS_TOKEN"}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["TMPDIR"] = str(tmp)
    env.update(env_add or {})
    config = ["--config", str(APP), *(a for s in sets for a in ("--set", s))]
    bh = ByHand(Hand(), "", token, env, config)
    try:
        if not (registry := bh.start_registry("registry")):
            raise StartFailed(f"the registry did not start\n{bh.hand.said()}")
        bh.registry = registry
        for m, names in replicas(sets).items():
            for name in names:
                bh.hand.start(f"{m}:{name}", ["worker", *config, "--as", m, "--name", name,
                                              "--registry", registry, "--token-file",
                                              str(token)], env, work)
        if not all(bh.hand.wait_for(r"(serving)", first=1)):
            raise StartFailed(f"a worker did not start\n{bh.hand.said()}")
        plain = [what for what, _, log in bh.hand.procs if "mutual TLS" not in log.read_text()]
        if d.tls and plain:  # (each says it at start: docs/security.md, "TLS")
            raise StartFailed(f"not said under TLS: {plain}\n{bh.hand.said()}")
        yield bh
    finally:
        bh.left = bh.hand.stop()
        bh.left += [f"$TMPDIR of the workers: {x.relative_to(tmp)}" for x in tmp.rglob("*")]
        bh.said = bh.hand.said()
        shutil.rmtree(work, ignore_errors=True)


def run_by_hand(d: Draw, pki: Path | None, limit: float, env_add: dict[str, str] | None = None,
                started: Callable[[subprocess.Popen[str]], None] | None = None) -> Outcome:
    """The combination's run at a registry and workers started by hand (their own
    ``$TMPDIR``, which must be empty once they ended). ``env_add`` and ``started`` as
    `stratmix.run` takes them (``env_add`` given to the workers too)."""
    sets = d.sets(pki)
    bh: ByHand | None = None
    try:
        with hand_started(d, pki, env_add) as bh:
            out = stratmix.run(bh.run_args(), limit, sets, env_add=env_add, started=started)
    except StartFailed as exc:
        out = Outcome(1, stderr=str(exc))
    if bh is not None:
        out.left += bh.left
        if out.rc != 0 or out.left:
            out.stderr += "\n" + bh.said[-4000:]
    return out


def check(d: Draw, want: Outcome, pki: Path | None, limit: float = 10.0) -> str:
    """'' if the combination behaves as the docs say, else what went wrong."""
    tls = [tls_set(pki)] if d.tls and pki is not None else []
    if d.combo.refused_key or not d.by_hand:
        return stratmix.check(d.combo, want, limit, extra_sets=tls)
    got = run_by_hand(d, pki, limit)
    return stratmix.judge(d.combo, want, got, limit)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.integration.tlsmix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", nargs="?", type=int, default=20, help="combinations to run")
    ap.add_argument("--first", type=int, default=0, help="the first seed")
    ap.add_argument("--seed", type=int, help="run this seed alone")
    ap.add_argument("--limit", type=float, default=10.0, help="seconds a run may take")
    ap.add_argument("--tls", action=argparse.BooleanOptionalAction, default=None,
                    help="TLS on (--no-tls: off) in every draw; else drawn")
    ap.add_argument("--by-hand", action=argparse.BooleanOptionalAction, default=None,
                    help="workers by hand (--no-by-hand: the local engine's); else drawn")
    ap.add_argument("--show", action="store_true", help="print each combination's --sets")
    ap.add_argument("-v", action="store_true", help="a line for each combination")
    a = ap.parse_args(argv)
    seeds = [a.seed] if a.seed is not None else list(range(a.first, a.first + a.n))
    want = stratmix.baseline()
    if want.rc != 0 or not want.digest:
        print(f"the baseline failed (rc {want.rc}):\n{want.stderr}", file=sys.stderr)
        return 100
    pki_dir = Path(tempfile.mkdtemp(prefix="tlsmix-pki-"))
    failed = 0
    try:
        pki = make_pki(pki_dir / "pki")
        for seed in seeds:
            d = draw(seed, a.tls, a.by_hand)
            how = ("tls " if d.tls else "") + ("by-hand" if d.by_hand else "local")
            if a.show:
                print(f"seed {seed} ({how}): " + " ".join(f"--set '{s}'" for s in d.sets(pki)))
            t0 = time.monotonic()
            why = check(d, want, pki, a.limit)
            if why:
                failed += 1
                print(f"seed {seed} ({how}): FAILED: {why}", flush=True)
            elif a.v:
                kind = (f"refused ({d.combo.refused_key})" if d.combo.refused_key
                        else "same answers")
                print(f"seed {seed} ({how}): {kind}, {time.monotonic() - t0:.1f} s", flush=True)
    finally:
        shutil.rmtree(pki_dir, ignore_errors=True)
    print(f"{len(seeds)} combination(s), {failed} failed", file=sys.stderr)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
