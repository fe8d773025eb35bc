"""Search a set of queries of very different lengths against one database entry."""

import random

from polybus import use

compare = use("compare")


def main(n: int = 40, entry_len: int = 200, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    entry = "".join(rng.choice("ACGT") for _ in range(entry_len))
    lengths = [min(400, int(8 * rng.paretovariate(1.2))) for _ in range(n)]  # skewed
    queries = ["".join(rng.choice("ACGT") for _ in range(k)) for k in lengths]
    scores = [compare(q, entry) for q in queries]
    return [int(s) for s in scores]
