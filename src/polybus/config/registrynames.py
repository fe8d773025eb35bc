"""The names a run registers, checked against what the registry takes (registry/limits.py)
before anything starts.

Each replica registers its name, its module's key and the interfaces it serves; the
registry refuses a name over `NAME_MAX` characters and more than `INTERFACES_MAX`
interfaces, and a replica's name also names its log file (``<name>.log``;
``polybus-<name>.log`` under ray), which a file system takes up to 255 bytes. A module
key, a replica name (``<key>-0``... from a count, or as written) or an interface past
those passed `polybus check` and failed at run: here it is a configuration mistake,
naming the key and the limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from polybus.config.model import ModuleSpec, ServeSpec
from polybus.config.problems import Problems, dotted
from polybus.config.replication import REPLICA_NAME
from polybus.http.response import HTTP_SUFFIX
from polybus.registry.limits import INTERFACES_MAX, NAME_MAX, said

__all__ = ["REPLICA_NAME_MAX", "REPLICA_NAME_RULE", "check_registered_names",
           "default_replica_name", "replica_name_fault"]

FILE_NAME_MAX = 255  # bytes of one file name (ext4, xfs, tmpfs...); these names are ASCII
REPLICA_NAME_MAX = min(NAME_MAX, FILE_NAME_MAX - len("polybus-.log"))
"""Characters of a replica's name: the registry's limit, and its log file's name."""
NAMED = "a replica's name is registered, and names its log file"
SHOWN = 40  # characters of a long name in a message (its length said beside)
REPLICA_NAME_RULE = (f"a replica's name is ASCII letters, digits, '_', '.' and '-', starting "
                     f"with a letter, a digit or '_', at most {REPLICA_NAME_MAX} characters, "
                     "as a configuration's replication writes it")


def shown(name: str) -> str:
    """``name`` quoted, cut to `SHOWN` characters (its length is said beside)."""
    return said(name) if len(name) <= SHOWN else f"{said(name[:SHOWN])[:-1]}...'"


def replica_name_fault(name: str) -> str | None:
    """Why ``name`` is no replica's name a configuration could write (`polybus worker
    --name`: one with a space or a '/' registered and served, though no configuration
    could name that replica), with the rule; None if it is one."""
    if not name:
        why = "is empty"
    elif len(name) > REPLICA_NAME_MAX:
        why = f"is {len(name):,} characters long"
    elif REPLICA_NAME.fullmatch(name) is None:
        if REPLICA_NAME.fullmatch(name[0]) is None:
            why = f"starts with {name[0]!r}"
        else:
            why = f"holds {next(c for c in name if not REPLICA_NAME.fullmatch('a' + c))!r}"
    else:
        return None
    return f"{why}: {REPLICA_NAME_RULE}"


_REFUSED = re.compile(r"[^A-Za-z0-9_.\-]")  # (a character no replica's name holds)


def default_replica_name(module: str, host: str, pid: int) -> str:
    """The name of a worker started by hand without ``--name``: ``module-host-pid``, made
    a name the rule takes (`replica_name_fault`): each character it refuses replaced by
    '_' (``my server.py``: ``my_server-vm-4242``), a first '.' or '-' too, and the
    module's part cut to fit `REPLICA_NAME_MAX`."""
    tail = _REFUSED.sub("_", f"-{host}-{pid}")[-(REPLICA_NAME_MAX - 1):]
    head = _REFUSED.sub("_", module)[:REPLICA_NAME_MAX - len(tail)] or "_"
    if head[0] in ".-":
        head = "_" + head[1:]
    return head + tail


def _long(what: str, name: str, most: int, why: str, aside: str = "") -> str:
    return (f"{what} {shown(name)}{aside} is {len(name):,} characters long, over the limit "
            f"of {most:,} ({why})")


def check_registered_names(modules: Mapping[str, ModuleSpec],
                           interfaces: Mapping[str, Sequence[str] | None],
                           serve: ServeSpec | None, p: Problems) -> None:
    """Add a mistake for each module key, replica name (the longest of a module's) and
    served interface past what the registry takes."""
    for key, m in modules.items():
        if len(key) > NAME_MAX:
            p.add(_long("module key", key, NAME_MAX, "the registry's, for a module's name"),
                  dotted("modules", key), "give the module a shorter key")
            continue  # (its replicas' names, made from it, say the same again)
        if not m.replication:  # (no replica: nothing of it is registered)
            continue
        name = max((r.name for r in m.replication), key=len)
        if len(name) > REPLICA_NAME_MAX:
            if name.startswith(f"{key}-") and name[len(key) + 1:].isdigit():
                p.add(_long("replica name", name, REPLICA_NAME_MAX, f"{NAMED}; a count's "
                            "replicas are named after their module's key: '<key>-0', "
                            "'<key>-1'..."),
                      dotted("modules", key), "give the module a shorter key")
            else:
                p.add(_long("replica name", name, REPLICA_NAME_MAX, NAMED),
                      dotted("modules", key, "replication"), "give the replica a shorter name")
        served = interfaces.get(key)
        if served is not None:
            _check_interfaces(key, m, served, serve, p)


def _check_interfaces(key: str, m: ModuleSpec, served: Sequence[str],
                      serve: ServeSpec | None, p: Problems) -> None:
    routed = sorted({r.interface for r in serve.routes if r.module == key} if serve else ())
    names = [*served, *(n + HTTP_SUFFIX for n in routed if n in served)]
    if len(names) > INTERFACES_MAX:
        p.add(f"module {key!r} serves {len(names):,} interfaces, over the registry's limit "
              f"of {INTERFACES_MAX:,} a replica", dotted("modules", key),
              "a define table names the functions it serves")
        return
    for name in names:
        if len(name) > NAME_MAX:
            plain = name.removesuffix(HTTP_SUFFIX)
            aside = "" if plain == name else " (the form of it a [serve] route calls)"
            p.add(_long("interface", name, NAME_MAX, "the registry's, for an interface's "
                        "name", aside),
                  dotted("modules", key, *(("define", plain) if plain in m.define else ())),
                  "give the function a shorter name")
