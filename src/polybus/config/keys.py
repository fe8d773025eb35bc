"""Which keys each table takes, and where a key written in the wrong table belongs.

A serving-side key in a client's use table (or the reverse), or an interface's option
written on the module itself, is a mistake of place, not of spelling: the hint says where
the key goes instead of listing the keys of the table it is in.
"""

from __future__ import annotations

from collections.abc import Sequence

from polybus.config.problems import dotted

__all__ = ["CLUSTER_KEYS", "DEFINE_HINTS", "DEFINE_KEYS", "MODULE_KEYS", "TLS_KEYS", "TOP_KEYS",
           "USE_HINTS", "USE_KEYS", "module_hints"]

TOP_KEYS = ("modules", "bind", "cluster", "serve")
MODULE_KEYS = ("source", "replication", "define", "use", "entrypoint", "args", "kwargs",
               "transport", "pickle", "spin", "coalesce")
DEFINE_KEYS = ("priority", "pool", "queue", "overflow", "cache", "cache_bytes", "prefetch",
               "timeout", "idempotent")
USE_KEYS = ("callstyle", "loadratio", "balance", "aggregate", "linger", "timeout", "transport",
            "forward", "check_calls")
CLUSTER_KEYS = ("engine", "registry", "listen_host", "heartbeat", "max_frame", "token_file", "tls")
TLS_KEYS = ("cert", "key", "ca")

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
