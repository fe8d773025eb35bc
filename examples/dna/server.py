"""Compare a query sequence against a database entry (Kim and Purtilo's CORD paper, §2):
best local match score by a simple Smith-Waterman dynamic programme, pure Python."""


def compare(query: str, entry: str) -> int:
    best = 0
    prev = [0] * (len(entry) + 1)
    for q in query:
        cur = [0]
        for j, e in enumerate(entry):
            score = max(0, prev[j] + (2 if q == e else -1), prev[j + 1] - 1, cur[j] - 1)
            cur.append(score)
            best = max(best, score)
        prev = cur
    return best


# -- the pipeline of Kim and Purtilo's CORD paper, Fig. 1(c): the database split into
#    parts, one per stage --

def _database(size: int, entry_len: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice("ACGT") for _ in range(entry_len)) for _ in range(size)]


def search_part(carry: list, part: int, parts: int, size: int, entry_len: int,
                seed: int) -> list:
    """One stage: score ``carry = [query, scores so far]`` against part ``part`` of
    ``parts`` of the database and pass ``[query, scores]`` on to the next stage."""
    query, scores = carry[0], list(carry[1])
    db = _database(size, entry_len, seed)
    step = -(-size // parts)
    scores.extend(compare(query, e) for e in db[part * step:(part + 1) * step])
    return [query, scores]
