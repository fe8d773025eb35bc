"""Rudy's handler (seeds/003): ``ms`` milliseconds of modelled work, then a small JSON."""

import time


def work(query: dict[str, str]) -> dict[str, float]:
    ms = float(query.get("ms", "40"))
    if ms > 0:
        time.sleep(ms / 1000)
    return {"slept_ms": ms}
