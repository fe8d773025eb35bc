"""Compare a query sequence against a database entry (seeds/001 §2): best local match
score by a simple Smith-Waterman dynamic programme, pure Python."""


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
