from polybus import use, wait

work = use("work")


def main() -> dict[str, object]:
    r = wait([work(20000) for _ in range(8)])
    return {"ok": all(v[0] == r[0][0] for v in r), "parents": sorted({v[2] for v in r})}
