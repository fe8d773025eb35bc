"""Leak driver: a registry and three replicas serve waves of client sessions, and what
each long-lived process holds is sampled between waves (tests/leakhunt/README.md).

    .venv/bin/python tests/leakhunt/driver.py --waves 12 --per-wave 24 --out /tmp/leak.jsonl

It starts `polybus registry` and `polybus worker --config app.toml --as alpha|beta`
(alpha-0, alpha-1, beta-0) as a user would by hand, on 127.0.0.1, then runs waves of
sessions (session.py): runs that end normally over shm or tcp, each of several kinds
(plain, big, cached, agg, fwd, bcast, timeout, cancel, demand), runs killed with SIGKILL mid-burst, and
peers that send a wrong token, a bad frame, bytes that are not polybus, or half a
handshake, to a replica or to the registry. After each wave it samples each process's
VmRSS, open fds, threads, memfds and /dev/shm mappings, and asks each replica what it
holds (probe.py: the length of every container its runtime reaches). It prints one
table row per wave and process, and writes every sample as JSON lines to --out; at the
end it lists each runtime container whose length grew after the first wave. Every
process it started is ended by PID, even on failure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PY = sys.executable
POLYBUS = str(Path(PY).with_name("polybus"))
KINDS = ["plain", "big", "cached", "agg", "fwd", "bcast", "timeout", "cancel", "demand"]
REPLICAS = [("alpha-0", "alpha"), ("alpha-1", "alpha"), ("beta-0", "beta")]


def _wait_line(path: Path, pattern: str, deadline_s: float = 30) -> re.Match[str]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        m = re.search(pattern, path.read_text() if path.exists() else "")
        if m:
            return m
        time.sleep(0.05)
    raise RuntimeError(f"{path}: no line matching {pattern!r} within {deadline_s} s")


def _proc_sample(pid: int) -> dict[str, Any]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    fds = os.listdir(f"/proc/{pid}/fd")
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {"rss_kb": rss, "fds": len(fds),
            "threads": len(os.listdir(f"/proc/{pid}/task")),
            "memfd_fds": sum("memfd:" in x for x in links),
            "sockets": sum(x.startswith("socket:") for x in links),
            "shm_maps": len({m.split()[-1] for m in maps if "/dev/shm/" in m}),
            "memfd_maps": len({m.split()[-1] for m in maps if "memfd:" in m})}


class Cluster:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.token = work / "token"
        fd = os.open(self.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, secrets.token_hex(32).encode())
        os.close(fd)
        self.registry = ""
        self.tcp: dict[str, str] = {}

    def _start(self, name: str, argv: list[str]) -> Path:
        log = self.work / f"{name}.log"
        env = dict(os.environ, PYTHONTRACEMALLOC=os.environ.get("LEAK_TRACEMALLOC", ""))
        if not env["PYTHONTRACEMALLOC"]:
            del env["PYTHONTRACEMALLOC"]
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                cwd=HERE, env=env)
        return log

    def start(self) -> None:
        log = self._start("registry", [POLYBUS, "registry", "--listen", "127.0.0.1:0",
                                       "--token-file", str(self.token)])
        self.registry = _wait_line(log, r"listening on (\S+)").group(1)
        for name, module in REPLICAS:
            log = self._start(name, [POLYBUS, "worker", "--registry", self.registry,
                                     "--config", "app.toml", "--as", module, "--name",
                                     name, "--token-file", str(self.token)])
            self.tcp[name] = _wait_line(log, r"at tcp://(\S+)").group(1)
        _wait_line(self.work / "registry.log", r"beta-0 registered")
        for name, _ in REPLICAS:
            _wait_line(self.work / "registry.log", f"{name} registered")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _session(cluster: Cluster, argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PY, str(HERE / "session.py"), *argv], cwd=HERE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wave(cluster: Cluster, rng: random.Random, n: int, seed: int, parallel: int,
         mix: tuple[float, float] = (0.55, 0.75), kinds_from: list[str] = KINDS,
         ) -> dict[str, int]:
    """Runs ``n`` sessions, ``parallel`` at a time; returns what was done. ``mix``: the
    shares of sessions of runs, and of those and runs killed (the rest: bad peers)."""
    done = {"runs": 0, "killed": 0, "bad": 0, "failed": 0}
    plan: list[tuple[str, list[str]]] = []
    for i in range(n):
        r = rng.random()
        if r < mix[0]:
            kinds = ",".join(rng.choice(kinds_from) for _ in range(rng.randint(2, 5)))
            plan.append(("runs", ["runs", cluster.registry, str(cluster.token),
                                  rng.choice(["shm", "tcp"]), str(seed + i), kinds]))
        elif r < mix[1]:
            plan.append(("kill", ["runs", cluster.registry, str(cluster.token),
                                  rng.choice(["shm", "tcp"]), str(seed + i),
                                  rng.choice(["burst", "fwd,burst", "cached,burst"])]))
        else:
            where = rng.choice([cluster.registry, *cluster.tcp.values()])
            how = rng.choice(["token", "frame", "magic", "half"])
            plan.append(("bad", ["bad", where, str(cluster.token), how]))
    running: list[tuple[str, subprocess.Popen[bytes], float]] = []
    while plan or running:
        while plan and len(running) < parallel:
            what, argv = plan.pop()
            kill_at = time.monotonic() + rng.uniform(0.6, 1.6) if what == "kill" else 0.0
            running.append((what, _session(cluster, argv), kill_at))
        time.sleep(0.02)
        for item in list(running):
            what, p, kill_at = item
            if what == "kill" and p.poll() is None and time.monotonic() >= kill_at:
                os.kill(p.pid, signal.SIGKILL)
            if p.poll() is None:
                continue
            running.remove(item)
            err = p.stderr.read().decode() if p.stderr else ""
            if p.stderr:
                p.stderr.close()
            if what == "kill":
                done["killed"] += 1
            elif p.returncode != 0:
                done["failed"] += 1
                print(f"  session {what} rc={p.returncode}: {err.strip()[-300:]}",
                      file=sys.stderr)
            else:
                done["runs" if what == "runs" else "bad"] += 1
    return done


def probe(cluster: Cluster, replica: str) -> dict[str, Any]:
    out = subprocess.run([PY, str(HERE / "session.py"), "probe", cluster.registry,
                          str(cluster.token), replica], cwd=HERE, capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def sample(cluster: Cluster) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for name, p in cluster.procs.items():
        s[name] = _proc_sample(p.pid)
        if name != "registry":
            s[name]["probe"] = probe(cluster, name)
    s["dev_shm"] = len(os.listdir("/dev/shm"))
    return s


def _row(wave_no: int, served: int, name: str, x: dict[str, Any]) -> str:
    pr = x.get("probe", {})
    sizes = pr.get("sizes", {})
    cache = sizes.get("cache._entries", "-")
    kept = sizes.get("forwarding.kept._lru._entries", "-")
    uncl = sizes.get("forwarding._arrived.values", "-")
    chans = sizes.get("_channels", "-")
    traced = pr.get("traced_bytes")
    return (f"{wave_no:>4} {served:>6} {name:<9} {x['rss_kb']:>8} {x['fds']:>4} "
            f"{x['threads']:>3} {x['memfd_fds']:>5} {x['shm_maps']:>4} {chans!s:>5} "
            f"{cache!s:>5} {kept!s:>5} {uncl!s:>5} {pr.get('objects', '-')!s:>7}"
            + (f" {traced // 1024:>8}" if traced is not None else ""))


def grown(samples: list[dict[str, Any]]) -> list[str]:
    """Each runtime container, per replica, longer at the end than after wave 1 and
    never shorter between: what kept growing."""
    out = []
    for name, _ in REPLICAS:
        seq = [s[name]["probe"]["sizes"] for s in samples[1:]]
        for path in seq[-1]:
            vals = [z.get(path, 0) for z in seq]
            if vals[-1] > vals[0] and all(b >= a for a, b in itertools.pairwise(vals)):
                out.append(f"{name} {path}: " + " ".join(map(str, vals)))
        types = [s[name]["probe"]["types"] for s in samples[1:]]
        for t in types[-1]:
            vals = [z.get(t, 0) for z in types]
            if vals[-1] > vals[0] * 1.2 and all(b >= a for a, b in itertools.pairwise(vals)):
                out.append(f"{name} objects of type {t}: " + " ".join(map(str, vals)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--waves", type=int, default=10)
    ap.add_argument("--per-wave", type=int, default=24, help="sessions per wave")
    ap.add_argument("--parallel", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="", help="JSON lines of every sample")
    ap.add_argument("--mix", default="0.55,0.2",
                    help="shares of sessions of runs and of runs killed (the rest: bad peers)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="the kinds runs choose from")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    runs, killed = map(float, args.mix.split(","))
    with tempfile.TemporaryDirectory(prefix="leakhunt-") as tmp:
        cluster = Cluster(Path(tmp))
        out = open(args.out, "w") if args.out else None  # noqa: SIM115 (closed below)
        samples: list[dict[str, Any]] = []
        try:
            cluster.start()
            print(f"registry {cluster.registry}; pids " + ", ".join(
                f"{k} {p.pid}" for k, p in cluster.procs.items()), flush=True)
            print("wave served process  rss_kB  fds thr memfd shm  chan cache  kept uncl. objects"
                  + (" traced_kB" if os.environ.get("LEAK_TRACEMALLOC") else ""))
            served = 0
            for w in range(args.waves + 1):
                if w:
                    t0 = time.monotonic()
                    d = wave(cluster, rng, args.per_wave, w * 1000, args.parallel,
                             (runs, runs + killed), args.kinds.split(","))
                    served += args.per_wave
                    print(f"  wave {w}: {d} in {time.monotonic() - t0:.0f} s", flush=True)
                s = sample(cluster)
                s["wave"], s["served"] = w, served
                samples.append(s)
                for name in cluster.procs:
                    print(_row(w, served, name, s[name]), flush=True)
                if out:
                    out.write(json.dumps(s) + "\n")
                    out.flush()
            print("\ngrew after wave 1:" if len(samples) > 2 else "")
            for line in grown(samples) if len(samples) > 2 else []:
                print("  " + line)
        finally:
            cluster.stop()
            if out:
                out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
