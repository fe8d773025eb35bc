"""A client whose answer must not depend on the call style or the replication.

It uses promises as values: arithmetic, comparison, numpy, indexing, iteration,
str, passing one promise on as an argument of another call.
"""

from collections import Counter

import numpy as np

from polybus import use, wait

square = use("square")
scale = use("scale")
describe = use("describe")
echo = use("echo")
pair = use("pair")


def main(n=12):
    squares = [square(i) for i in range(n)]
    total = sum(squares)                     # arithmetic on promises
    biggest = max(squares)                   # comparison
    shifted = [s + 1 for s in squares]       # promise + int
    arrays = [
        np.arange(6, dtype=np.int64).reshape(2, 3),
        np.linspace(0, 1, 5, dtype=np.float32),
        np.array(2.5),
        np.zeros((0, 4)),
        np.arange(10, dtype=np.uint8),
    ]
    scaled = [scale(a, 2) for a in arrays]
    back = [echo(a) for a in arrays]
    same = all(np.array_equal(np.asarray(b), a) and np.asarray(b).dtype == a.dtype
               and np.asarray(b).shape == a.shape for a, b in zip(arrays, back, strict=True))
    m = scaled[0] @ np.ones(3)                # numpy op on a promise
    norm = float(np.linalg.norm(scaled[1]))
    nested = square(square(3))                # a promise passed on as an argument
    p = pair("ab", {"k": [1, 2]})
    first, second = p                         # iteration
    texts = f"{square(4)}|{square(5)!s}|{len(echo('hello'))}"
    kinds = [describe(a) for a in arrays[:2]]
    counted = Counter()
    for part in [echo({"a": 2, "b": 1}), echo({"a": 3})]:
        counted.update(part)                  # isinstance(part, Mapping) on a promise
    return wait({
        "total": total, "biggest": biggest, "shifted": shifted, "same": same,
        "m": m.tolist(), "norm": round(norm, 6), "nested": nested,
        "first": first, "second": second["k"][1], "texts": texts, "kinds": kinds,
        "scaled0d": float(scaled[2]), "empty": list(np.asarray(scaled[3]).shape),
        "bool": bool(square(0)), "index": ["a", "b", "c"][square(1)],
        "counted": dict(counted),
    })


def threads(n_threads=4, per=150):
    """Calls from several threads at once: every thread gets its own answers."""
    import threading

    out = [None] * n_threads

    def work(t):
        out[t] = [int(wait(square(t * 1000 + i))) for i in range(per)]

    ts = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return all(out[t] == [(t * 1000 + i) ** 2 for i in range(per)] for t in range(n_threads))
