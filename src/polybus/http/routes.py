"""Which route serves a request: method and path against ``[serve.routes]``. Pure.

``/work`` matches that path only; ``/api/*`` matches ``/api`` and everything below it
(``/api/x``, not ``/apix``), and ``/*`` every path. An exact route wins over a prefix,
a longer prefix over a shorter one, and at equal paths a route for the request's method
over one for any method. A path matched only by routes of other methods is 405, with
the methods that would do; HEAD is served by GET routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Match", "RouteTable", "split_route_key"]

T = TypeVar("T")


def split_route_key(key: str) -> tuple[str | None, str]:
    """``"GET /api/*"`` -> ("GET", "/api/*"); ``"/x/"`` -> (None, "/x"). ValueError if
    it is neither "METHOD /path" nor "/path"."""
    parts = key.split()
    if len(parts) == 1:
        method, path = None, parts[0]
    elif len(parts) == 2:
        method, path = parts
        if not method.isalpha() or not method.isupper():
            raise ValueError(f"bad method {method!r} (upper-case letters, e.g. GET)")
    else:
        raise ValueError("expected \"METHOD /path\" or \"/path\"")
    if not path.startswith("/"):
        raise ValueError(f"a route path starts with '/', got {path!r}")
    if "*" in path.removesuffix("/*"):
        raise ValueError("'*' may only end a path, as in /static/*")
    return method, path if path.endswith("/*") else (path.rstrip("/") or "/")


@dataclass(frozen=True)
class Match(Generic[T]):
    target: T | None        # None: no route (see allowed)
    subpath: str = ""       # below a prefix route's path: "" or "/..."
    allowed: tuple[str, ...] = ()  # for 405: methods of routes that match the path


class RouteTable(Generic[T]):
    def __init__(self, routes: Sequence[tuple[str | None, str, T]]) -> None:
        entries = []
        for method, path, target in routes:
            prefix = path.endswith("/*")
            base = path[:-2] if prefix else path
            entries.append((method, base, prefix, target))
        # exact first, then the longest prefix; a method's route before any-method
        self._routes = sorted(entries, key=lambda e: (e[2], -len(e[1]), e[0] is None))

    def match(self, method: str, path: str) -> Match[T]:
        look = "GET" if method == "HEAD" else method
        allowed: list[str] = []
        for m, base, prefix, target in self._routes:
            if prefix:
                if not (base == "" or path == base or path.startswith(base + "/")):
                    continue
            elif path != base:
                continue
            if m is None or m in (method, look):
                return Match(target, path[len(base):] if prefix else "")
            allowed.append(m)
            if m == "GET":  # (HEAD is served by GET routes, so Allow names it too)
                allowed.append("HEAD")
        return Match(None, allowed=tuple(dict.fromkeys(allowed)))
