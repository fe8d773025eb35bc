"""Search queries against a database split into parts, one part per stage (Kim and
Purtilo's CORD paper, Fig. 1(c)): each query flows through the stages, each adding the
scores for its part.

With the async call style each stage's answer is a promise passed straight to the next
stage; forwarding (on by default) sends it replica to replica, so only the query goes
out and the final scores come back. ``--set modules.client.use.stage2.forward=false``
(and stage3, stage4) sends every intermediate back through the client instead.
"""

import random

from polybus import use, wait

stages = [use(f"stage{i}") for i in range(1, 5)]


def main(n: int = 16, size: int = 32, entry_len: int = 16, seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    lengths = [min(2000, int(200 * rng.paretovariate(1.5))) for _ in range(n)]  # skewed
    queries = ["".join(rng.choice("ACGT") for _ in range(k)) for k in lengths]
    out = []
    for q in queries:
        carry = [q, []]
        for part, stage in enumerate(stages):
            carry = stage(carry, part, len(stages), size, entry_len, seed)
        out.append(carry)
    return [wait(c)[1] for c in out]
