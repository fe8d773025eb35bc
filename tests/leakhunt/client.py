"""One run of the leak driver: `main(kind, n, seed)` makes one kind of traffic."""

import numpy as np

import polybus
from polybus import use

add_s = use("add_s")
scale_a = use("scale_a")
cadd = use("cadd")
tiny = use("tiny")
total = use("total")
finish = use("finish")
slow = use("slow")
slow_a = use("slow_a")
scale_d = use("scale_d")
probe_a = use("probe_a")
probe_b = use("probe_b")


def main(kind="plain", n=8, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "plain":
        x = rng.random(1000)
        got = [add_s(x, x) for _ in range(n)]          # sync
        ps = [scale_a(x, i) for i in range(n)]          # async
        return float(sum(np.sum(g) for g in got) + sum(np.sum(p) for p in ps))
    if kind == "big":  # arrays past shm's segment size
        x = rng.random(64 * 1024)
        ps = [scale_a(x, i) for i in range(n)]
        return float(sum(np.sum(p) for p in ps))
    if kind == "cached":  # fresh frozen operands each session
        b = rng.random(40_000)
        b.flags.writeable = False
        big = rng.random(300_000)
        big.flags.writeable = False
        ps = [cadd(rng.random(40_000), b) for _ in range(n)]
        ps += [cadd(rng.random(300_000), big) for _ in range(2)]
        return float(sum(np.sum(p) for p in ps))
    if kind == "agg":
        ps = [tiny(i) for i in range(n * 8)]
        return sum(polybus.wait(ps))
    if kind == "fwd":  # alpha -> beta and alpha -> alpha, replica to replica
        x = rng.random(20_000)
        ps = [finish(scale_a(x, i)) for i in range(n)]
        ps += [total(scale_a(x, i)) for i in range(n)]
        return sum(polybus.wait(ps))
    if kind == "bcast":
        h = polybus.broadcast(rng.random(50_000))
        ps = [cadd(rng.random(50_000), h) for _ in range(n)]
        return float(sum(np.sum(p) for p in ps))
    if kind == "timeout":
        lost = 0
        for _ in range(2):
            try:
                slow(0.3)
            except Exception:
                lost += 1
        return lost
    if kind == "cancel":  # calls revoked while queued behind a slow one
        ps = [slow_a(0.02) for _ in range(6)]
        gone = sum(p.cancel() for p in ps[2:])
        for p in ps:
            if not p.cancelled():
                try:  # (its 100 ms timeout may end a wait behind the others)
                    polybus.wait(p)
                except polybus.CallTimeoutError:
                    gone += 1
        return gone
    if kind == "demand":  # async-demand with stealing between the two replicas
        x = rng.random(2000)
        ps = [scale_d(x, i) for i in range(n * 4)]
        return float(sum(np.sum(p) for p in ps))
    if kind == "burst":  # many calls in flight, for a kill mid-burst
        x = rng.random(5000)
        ps = [scale_a(x, i) for i in range(n * 50)]
        ps += [finish(scale_a(x, i)) for i in range(n * 10)]
        ps += [tiny(i) for i in range(n * 50)]
        return float(sum(np.sum(p) for p in polybus.wait(ps)))
    if kind == "probe_a":
        return probe_a()
    if kind == "probe_b":
        return probe_b()
    raise ValueError(kind)
