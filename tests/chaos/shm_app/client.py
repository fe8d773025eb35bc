"""A client process of the shm lifetime tests: ``client.py MODE REGISTRY [SEED]``.

``doomed``: calls on and on (cached B, large echoes) and says "go" once answers came;
the test then SIGKILLs it. ``check``: 20 rounds with its own B and arrays, then prints
how many answers were wrong. ``burst``: 600 large calls at once with at most 256
descriptors, then the same count.
"""

import resource
import sys
from pathlib import Path

import numpy as np

from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.config import load
from polybus.token import read_token


def main() -> None:
    mode, registry = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if mode == "burst":
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    session = Session(load(Path(__file__).with_name("app.toml")), registry, read_token() or b"")
    rng = np.random.default_rng(seed)
    wrong = 0
    rounds = {"doomed": 10**9, "check": 20, "burst": 1}[mode]
    for r in range(rounds):
        b, a = rng.random((200, 200)), rng.random((16, 200))  # B: 320 KB, by segment
        xs = [rng.random(40_000) for _ in range(600 if mode == "burst" else 3)]
        rows = [session.call("mul", (a[i], b), {}) for i in range(16)]
        echoes = [session.call("echo", (x,), {}) for x in xs]
        wrong += not np.allclose(np.vstack([np.asarray(wait(p)) for p in rows]), a @ b)
        wrong += sum(not np.array_equal(np.asarray(wait(p)), x) for p, x in zip(echoes, xs, strict=True))
        if mode == "doomed" and r == 0:
            print("go", flush=True)
    session.close()
    print(f"wrong {wrong}", flush=True)


if __name__ == "__main__":
    main()
