"""Which keys each table takes, and where a key written in the wrong table belongs.

A serving-side key in a client's use table (or the reverse), or an interface's option
written on the module itself, is a mistake of place, not of spelling: the hint says where
the key goes instead of listing the keys of the table it is in.
"""

from __future__ import annotations

from collections.abc import Sequence

from polybus.config.problems import dotted

__all__ = ["CLUSTER_KEYS", "DEFINE_HINTS", "DEFINE_KEYS", "MODULE_KEYS", "SERVE_KEYS", "TLS_KEYS",
           "TOP_KEYS", "USE_HINTS", "USE_KEYS", "home_hint", "module_hints"]

TOP_KEYS = ("modules", "bind", "cluster", "serve")
MODULE_KEYS = ("source", "replication", "define", "use", "entrypoint", "args", "kwargs",
               "transport", "pickle", "spin", "coalesce", "cpus")
DEFINE_KEYS = ("priority", "pool", "queue", "overflow", "cache", "cache_bytes", "prefetch",
               "timeout", "idempotent")
USE_KEYS = ("callstyle", "loadratio", "balance", "aggregate", "linger", "timeout", "transport",
            "forward", "check_calls")
CLUSTER_KEYS = ("engine", "registry", "listen_host", "heartbeat", "max_frame", "token_file", "tls")
TLS_KEYS = ("cert", "key", "ca")
SERVE_KEYS = ("listen", "routes", "max_body", "max_head", "max_connections", "idle_timeout",
              "head_timeout", "min_body_rate", "tracebacks", "grace", "restart",
              "restart_pause")

USE_HINTS = {k: f"{k} belongs to the serving side: define.<iface>.{k} "
                "of the module the interface is bound to"
             for k in DEFINE_KEYS if k not in USE_KEYS}
DEFINE_HINTS = {k: f"{k} belongs to the calling side: use.<iface>.{k} "
                   "of the client module"
                for k in USE_KEYS if k not in DEFINE_KEYS}

_SHOWN = 3  # places named in one hint; more are left out


def _places(module: str, table: str, names: Sequence[str], key: str, unknown: str) -> str:
    if not names:
        return f"{table}.<iface>.{key} of {unknown}"
    places = [dotted("modules", module, table, n, key) for n in names[:_SHOWN]]
    return " or ".join(places) + (" or ..." if len(names) > _SHOWN else "")


def module_hints(module: str, used: Sequence[str], served: Sequence[str]) -> dict[str, str]:
    """Hints for interface options written on ``[modules.<module>]`` itself, naming the
    interfaces it uses and serves (from its tables and [bind]) where they are known."""
    hints: dict[str, str] = {}
    for k in dict.fromkeys((*USE_KEYS, *DEFINE_KEYS)):
        if k in MODULE_KEYS:
            continue
        where = []
        if k in USE_KEYS:
            where.append("a used interface: "
                         + _places(module, "use", used, k, "the module that calls it"))
        if k in DEFINE_KEYS:
            where.append("a defined interface: "
                         + _places(module, "define", served, k, "the module that serves it"))
        hints[k] = f"{k!r} is an option of " + ", or of ".join(where)
    return hints


def _table(path: Sequence[str]) -> str | None:
    """Which table ``path`` (its dotted parts) is: top, cluster, serve, module, define,
    use; None for another (a route, tls: their keys have no other home)."""
    if len(path) <= 1:
        return "top" if not path else {"cluster": "cluster", "serve": "serve"}.get(path[0])
    if path[0] == "modules" and len(path) == 2:
        return "module"
    if path[0] == "modules" and len(path) == 4 and path[2] in ("define", "use"):
        return path[2]
    return None


_SAID = {"top": "the file's top level (a key above its first [table] header is there)",
         "cluster": "[cluster]", "serve": "[serve]", "module": "a module's table",
         "define": "an interface's define table", "use": "an interface's use table"}


def home_hint(key: str, path: Sequence[str]) -> str | None:
    """Where ``key``, written in the table at ``path`` where it is no key, is one: a
    [cluster] key in a module's table (``engine``), a module's key at the top level
    (``source`` above every header), an interface's option in [cluster]. None if it is
    a key of no other table (or of one whose mix-ups module_hints, USE_HINTS and
    DEFINE_HINTS say). Said before a near spelling in the table itself: ``engine`` in a
    module's table was "did you mean 'define'?", ``listen`` at the top "'cluster'?"."""
    here = _table(path)
    if here is None:
        return None
    module = path[1] if here in ("module", "define") else "<key>"
    homes = []
    if key in CLUSTER_KEYS and here != "cluster":
        homes.append(f"[cluster]: cluster.{key}")
    if key in SERVE_KEYS and here != "serve":
        homes.append(f"[serve]: serve.{key}")
    if key in MODULE_KEYS and here != "module" and not (here == "use" and key in USE_KEYS):
        whose = {"use": "the serving module's table", "define": "the module's table"}.get(
            here, "a module's table")
        homes.append(f"{whose}: modules.{module}.{key}")
    if here in ("top", "cluster", "serve"):
        if key in DEFINE_KEYS:
            homes.append(f"an interface's define table: modules.<key>.define.<iface>.{key}")
        if key in USE_KEYS:
            homes.append(f"an interface's use table: modules.<client>.use.<name>.{key}")
    if not homes:
        return None
    return f"{key!r} is a key of " + ", or of ".join(homes) + f", not of {_SAID[here]}"
