"""Where the ray engine's output goes: the replicas' lines to the run's worker output
(stderr by default), Ray's own messages to stderr, never to stdout (the result's).

A private Ray (the run's own, on this machine): each actor points its fds 1 and 2 at a
log file of its own in the run's Ray directory as it starts serving (`redirect`), and
the engine follows those files as the local engine follows its workers' logs
(logfollow.py: the same ``(server-0) line`` form, the banner left out, what is left read
at the end, an unfinished last line too). Ray does not forward them (``log_to_driver``
off): its forwarding went to stdout, and lost a short run's lines, all of them.

A joined cluster (``$RAY_ADDRESS``: actors perhaps on other hosts, whose files the run
cannot read) keeps Ray's forwarding. Ray prints what it forwards, and its own messages
("(raylet) A worker died or was killed ..."), through one function of its driver,
``ray._private.worker.print_to_stdstream``, which writes a worker's stdout lines to
sys.stdout; `route_prints` puts one in its place while the run's Ray is up that sends
an actor's lines to the run's worker output in the local engine's form and everything
else to stderr.

Ray binds its daemons to the host's outward address whatever ``ray.init`` is told (not
loopback, as the rest of a run): `outward_interfaces` finds whether this machine has
such an address up, for the engine's warning (a private network namespace with only
loopback, ``unshare -n``, has none).
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any, TextIO

from polybus.engines.logfollow import is_banner

__all__ = ["outward", "outward_interfaces", "ray_cause", "ray_death", "redirect", "route_prints"]

_IFF_UP, _IFF_LOOPBACK = 0x1, 0x8  # (linux/if.h)
_SIOCGIFFLAGS = 0x8913
_IFREQ = struct.Struct("16sH22x")  # struct ifreq: the name, then ifr_flags (40 bytes)


def outward_interfaces() -> list[str]:
    """The network interfaces up in this process's network namespace other than
    loopback, by name (none where that cannot be asked). Asked of the kernel
    (if_nameindex, SIOCGIFFLAGS), not read from /sys/class/net: that shows the
    namespace it was mounted in, the host's interfaces inside ``unshare -n`` too."""
    try:
        names = [name for _, name in socket.if_nameindex()]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            return outward([(name, _flags(s, name)) for name in names])
    except OSError:
        return []


def _flags(s: socket.socket, name: str) -> int:
    req = _IFREQ.pack(name.encode()[:15], 0)
    flags: int = _IFREQ.unpack(fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, req))[1]
    return flags


def outward(interfaces: list[tuple[str, int]]) -> list[str]:
    """Of ``interfaces`` (name, flags), the names of those up and not loopback."""
    return [name for name, flags in interfaces
            if flags & _IFF_UP and not flags & _IFF_LOOPBACK]


def redirect(path: str) -> None:
    """Point this process's fds 1 and 2 at the end of the file ``path`` (an actor's,
    as it starts serving): whatever writes to them, Python or not, goes there. Ray's
    sys.stdout and sys.stderr write through to the fds (line buffering, flushed at each
    write), so a line printed is in the file at once."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def route_prints(worker: Any, echo: TextIO | None) -> Callable[[], None]:
    """Put a function in the place of Ray's driver-side ``print_to_stdstream`` (of
    ``worker``, the module ``ray._private.worker``) that sends an actor's lines to
    ``echo`` as ``(name) line`` (dropped without it), and Ray's own messages to stderr,
    as Ray writes them; returns what puts Ray's back. Set before ``ray.init``, which
    takes the function for its forwarding then. A Ray without it is left as it is."""
    original = getattr(worker, "print_to_stdstream", None)
    if original is None:
        return lambda: None

    def printed(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        name = data.get("actor_name") or data.get("task_name")
        if data.get("pid") in ("raylet", "autoscaler") or not name:
            original(dict(data, is_err=True), ignore_prefix)  # (stderr, Ray's form)
            return
        if echo is None:
            return
        lines = [f"({name}) {ln}\n" for ln in data.get("lines", ())
                 if not is_banner(name, ln)]
        try:
            echo.write("".join(lines))
            echo.flush()
        except (OSError, ValueError):  # (a closed stream: as logfollow.py, not an error)
            pass

    worker.print_to_stdstream = printed

    def restore() -> None:
        if worker.print_to_stdstream is printed:
            worker.print_to_stdstream = original

    return restore


_EXIT = re.compile(r"Worker exit type: (\S+) Worker exit detail: (.*?)(?: Some common causes|$)",
                   re.S)


def ray_death(err: Any) -> str:
    """What Ray says of an actor's death, in one line, without its troubleshooting."""
    text = " ".join(str(err).split())
    m = _EXIT.search(text)
    if m is not None:
        return f"{m.group(2).strip()} (Ray: {m.group(1)})"
    return text or type(err).__name__


def ray_cause(err: Any) -> str:
    """The actor's own error, without Ray's wrapping of it."""
    cause = getattr(err, "cause", None)
    return str(cause) if cause is not None else str(err).strip().splitlines()[-1]
