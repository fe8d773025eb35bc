"""A cached parameter given a list (not an array or bytes) is said once: it went with
every call, uncached, and nothing said so (found by a new-user trial)."""

from __future__ import annotations

from pathlib import Path

from integration.conftest import cli
from polybus.testing.apps import write_bound_app


def test_a_list_where_cache_names_the_argument_is_said_once(tmp_path: Path) -> None:
    app = write_bound_app(tmp_path, server="""
        def total(xs, k=1):
            return sum(xs) * k
    """, client="""
        import numpy as np
        from polybus import use

        total = use("total")

        def main():
            return [total([1, 2, 3], k) for k in range(3)] + [total(np.arange(4))]
    """, names=("total",), server_keys='define.total = { cache = ["xs"] }')
    p = cli("run", app, "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[0, 6, 12, 6]"
    said = [ln for ln in p.stderr.splitlines() if "is cached (define.total.cache)" in ln]
    assert said == ["polybus: warning: total(...) argument 1 is cached (define.total.cache), "
                    "but a list is not: only an array or bytes is named and kept on the "
                    "replicas, so it goes with every call; pass numpy.asarray(...) to cache "
                    "it"], p.stderr


def test_the_extras_of_a_cached_catch_all_are_not_warned_of(tmp_path: Path) -> None:
    # (cache naming *more or **opts caches whichever extras are arrays; a label string
    # among them is no mistake, and was told to numpy.asarray itself: found by a review)
    app = write_bound_app(tmp_path, server="""
        def g(x, *more, **opts):
            return len(more) + len(opts)
    """, client="""
        import numpy as np
        from polybus import use

        g = use("g")

        def main():
            return [g(np.zeros(3), "label", mode="fast") for _ in range(2)]
    """, names=("g",), server_keys='define.g = { cache = ["x", "more", "opts"] }')
    p = cli("run", app, "--quiet", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "[2, 2]", p.stderr
    assert "is cached (define.g.cache)" not in p.stderr, p.stderr
