from polybus import use, wait

work = use("work")
children = use("children")


def main() -> dict[str, object]:
    r = wait([work(20000) for _ in range(8)])
    return {"ok": all(v[0] == r[0][0] for v in r), "parents": sorted({v[2] for v in r})}


def before_any_call() -> int:
    """The replica's children before any call has reached its process pool."""
    return int(children())
