"""``[cluster]``: where the parts of a program meet, and its mutual TLS files.

The TLS files are loaded as ``run`` loads them (transport/tls.py), so ``check`` finds a
key that does not match its certificate, an unreadable CA or a certificate the CA did not
sign, naming the ``cluster.tls`` key and the file.

The certificate must also name the host(s) other processes dial this machine at
(``TLSHosts``). Without ``registry`` every process of a run is on this machine, at
``listen_host``, and that is checked always. With one, the same file is read on the
registry's host, on every worker's host and on the clients': which one this is, the
file does not say, so the caller says it: ``polybus check`` compares with the
registry's host unless given ``--host NAME`` (the names this host is dialled at), and
``polybus registry --config`` with the registry's host; every other process checks no
name at load (a peer that dials it checks the name; a client's is never checked).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

from polybus.config.files import NUL_SAID, config_file, has_nul, not_a_file
from polybus.config.hostport import MALFORMED, address_fault
from polybus.config.keys import CLUSTER_KEYS, TLS_KEYS
from polybus.config.model import ClusterSpec, TLSFiles
from polybus.config.problems import Problems
from polybus.config.schema import ENGINES, LONGEST
from polybus.config.table import Table, is_address, pick
from polybus.config.units import parse_size, shown
from polybus.errors import ConfigError, UsageError
from polybus.transport.endpoints import WILDCARDS
from polybus.wire.framing import MAX_FRAME

__all__ = ["MAX_FRAME", "MIN_FRAME", "MIN_HEARTBEAT", "REGISTRY_FORMS", "TLSHosts",
           "check_registry_option", "parse_cluster", "registry_fault"]

# The least ``max_frame`` taken: every message between client and replicas is one
# frame, polybus's own too (a call's header, a remote error's traceback, a batch of
# small answers), so a limit of a few bytes passed check and failed the run's first
# call (docs/configuration.md). 64 KiB holds any of those, and is where large bytes
# start to travel as buffers of their own (wire/values.py OOB_BYTES).
MIN_FRAME = 64 * 1024
# The most: a frame's length is a u32 on the wire (wire/framing.py), and nothing clamps
# a larger limit (it passed check, then was sent garbled in the handshake's 16 bits, and
# a message past 4 GiB failed to pack rather than being refused as too large).
MAX_FRAME_SAID = "'4GiB' less a byte"
# The shortest heartbeat: a replica silent for 3 heartbeats is taken for dead, and a
# loaded machine delays a process for milliseconds. One of 1 us was taken: the worker
# never registered, its start spun on timeouts of nothing; one of 1 ms lost every call,
# its replica taken for dead 3 ms into the call. (Also `polybus worker --heartbeat`.)
MIN_HEARTBEAT = (0.01, "'10ms'")

TLSHosts: TypeAlias = (Sequence[str] | Literal["registry", "registry-by-hand", "worker", "client"]
                       | None)
"""The hosts the ``[cluster] tls`` certificate must name (with no ``registry``, besides
``listen_host``). None: no other, this machine's role being unknown (a process loading
the configuration). "registry": the registry's host (``polybus check``'s default).
"registry-by-hand": that of `polybus registry --config`, the same but that with no
``registry`` a wildcard ``listen_host`` is not checked (it is dialled at an address of
its host, never the wildcard, which a run's own workers register). "worker": none (`polybus worker --config` checks the address it registers
as it starts: worker/main.py). "client": none (a run or serve given a registry apart,
which starts no worker: a client is never dialled). Else each of these names
(``polybus check --host``)."""


REGISTRY_FORMS = "expected HOST:PORT with 1 <= PORT <= 65535, e.g. '10.0.0.5:7700'"


def registry_fault(address: str) -> str | None:
    """Why ``address`` is no registry's, as ``[cluster] registry`` refuses it (the command
    line takes ``tcp://HOST:PORT`` too, as the local engine gives it to its workers);
    None if it is one. Another transport's scheme (``inproc://``, a registry in this
    process, from Python) is left to the transport, which says what it takes; one of no
    transport (``http://``) is refused here, as the option's."""
    if "://" in address and not address.startswith("tcp://"):
        scheme = address.partition("://")[0]
        if scheme in ("inproc", "ipc", "shm"):  # (a transport's: it says what it takes)
            return None
        return (f"bad registry address: a registry is dialled over TCP, not {scheme}:// "
                f"({REGISTRY_FORMS})")
    rest = address.removeprefix("tcp://")
    why = address_fault(rest)
    if why is None:
        return None
    if not address:
        return f"the address is empty ({REGISTRY_FORMS})"
    if is_address(rest, lowest_port=0):  # (as `polybus registry --listen` may be given)
        return ("bad registry address: port 0 picks a free port where a registry listens, "
                f"and names none to dial ({REGISTRY_FORMS}: the port the registry printed)")
    if why in (MALFORMED, "port"):
        return f"bad registry address ({REGISTRY_FORMS})"
    return f"bad registry address: {why} ({REGISTRY_FORMS})"


def check_registry_option(address: str | None) -> None:
    """UsageError if ``address`` (``--registry``, ``registry=`` from Python) is given and
    is no registry's: refused as ``[cluster] registry`` is, before anything starts (port
    0 was dialled, "no registry answers"; ``''`` was taken for none, and the run started
    a cluster of its own)."""
    if address is not None and (fault := registry_fault(address)) is not None:
        raise UsageError(f"--registry {address!r}: {fault}")


LISTEN_HOST = ("a host name or an IP address of this machine, or '0.0.0.0' (every "
               "interface)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _listen_host(t: Table) -> str | None:
    """``listen_host``, unless it can name no interface (it passed check, and run failed
    at its first listen: "Name or service not known"). A name that looks up nowhere is
    left to the run: it may be another host's, or not yet in DNS, where check runs."""
    host = t.string("listen_host")
    if not host or host in WILDCARDS:
        return host
    why = _host_fault(host)
    if why is None:
        return host
    hint = LISTEN_HOST
    if why.endswith("without a port (the ports are picked free)"):
        hint += "; a worker started by hand takes --listen tcp://HOST:PORT"
    t.p.add(f"bad listen_host {host!r}: {why}", t.key("listen_host"), hint)
    return None


def _host_fault(host: str) -> str | None:
    """Why ``host`` can be no host a socket listens at, if it cannot."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            if _SCHEME.match(host):
                return "a host alone, without a scheme"
            if bare.rpartition(":")[2].isdigit():
                return "a host alone, without a port (the ports are picked free)"
            return "not an IPv6 address"
        return None
    odd = next((c for c in host if c.isspace() or not c.isprintable() or c in "/@[]"), None)
    if odd is not None:
        return f"no host name holds {odd!r}"
    if all(part.isdigit() for part in host.split(".")):  # (an IPv4 address, 127.1 too)
        try:
            socket.inet_aton(host)
        except OSError:
            return "not an IPv4 address (four numbers from 0 to 255)"
    return None


def _heartbeat(t: Table) -> float | None:
    """``heartbeat``: a duration from `MIN_HEARTBEAT` to `LONGEST`."""
    beat = t.positive_duration("heartbeat", LONGEST)
    if beat is not None and beat < MIN_HEARTBEAT[0]:
        t.p.add(f"a heartbeat of {shown(t.t['heartbeat'])} ({beat:.4g} s) is too short to "
                "keep: a replica silent for 3 heartbeats is taken for dead, and a busy "
                "machine delays a process longer than that", t.key("heartbeat"),
                f"from {MIN_HEARTBEAT[1]} to {LONGEST[1]}; the default is 1 s")
        return None
    return beat


def parse_cluster(table: dict[str, Any], base_dir: Path, p: Problems,
                  tls_hosts: TLSHosts = None, running: bool = False) -> ClusterSpec:
    """``[cluster]``. ``running``: the program is run from this configuration alone
    (``polybus check``, ``run`` without ``--registry``), so the hosts engine, which
    starts no workers, needs ``registry``: said at ``engine``, where it was written."""
    p.unknown_keys(table, CLUSTER_KEYS, "cluster")
    t = Table(table, ("cluster",), p)
    c = ClusterSpec()
    registry = t.address("registry", "registry", REGISTRY_FORMS)  # (registry_fault too)
    max_frame = t.parsed("max_frame", parse_size)
    if max_frame is not None and max_frame < MIN_FRAME:
        p.add(f"a max_frame of {shown(table['max_frame'])} is below the least polybus "
              f"takes, '64KiB' ({MIN_FRAME:,} bytes)", t.key("max_frame"),
              "at least '64KiB': polybus's own messages must fit in a frame too (a call's "
              "header, a remote error's traceback, a batch of answers)")
        max_frame = None
    elif max_frame is not None and max_frame > MAX_FRAME:
        p.add(f"a max_frame of {shown(table['max_frame'])} is more than a frame can be, "
              f"{MAX_FRAME_SAID} ({MAX_FRAME:,} bytes): a frame's length is 32 bits on "
              "the wire", t.key("max_frame"),
              f"from '64KiB' ({MIN_FRAME:,} bytes) to {MAX_FRAME_SAID}; the default is "
              "'1GiB'")
        max_frame = None
    token_file = t.string("token_file")
    if token_file is not None and has_nul(token_file):
        p.add(f"token_file {token_file!r} {NUL_SAID}", t.key("token_file"))
        token_file = None
    elif token_file is not None:
        token_file = str(config_file(base_dir, token_file))
    engine = t.string("engine", ENGINES)
    if engine in ("mpi", "ray") and registry is not None:
        p.add(f"the {engine} engine starts its own registry; it uses no other",
              t.key("registry"), "remove [cluster] registry, or use the hosts engine")
    if (running and engine == "hosts" and "registry" not in table
            and not p.reported(t.key("engine"))):
        by = p.override(t.key("engine"))
        give = 'registry="HOST:PORT" to polybus.run' if by and not by.shell else \
            "--registry HOST:PORT to run or serve"
        p.add("the hosts engine uses workers already running; it needs their registry",
              t.key("engine"), (by.add_hint("cluster.registry", '"HOST:PORT"') if by
                                else 'set registry = "HOST:PORT" in [cluster]')
              + f", or pass {give}")
    spec = ClusterSpec(
        tls=_parse_tls(t, base_dir, p),
        engine=cast(Literal["local", "hosts", "mpi", "ray"], pick(engine, c.engine)),
        registry=registry,
        listen_host=pick(_listen_host(t), c.listen_host),
        heartbeat=pick(_heartbeat(t), c.heartbeat),
        max_frame=pick(max_frame, c.max_frame),
        token_file=token_file,
    )
    if spec.tls is not None and not any(p.reported(f"cluster.tls.{k}") for k in TLS_KEYS):
        from polybus.transport.tls import TLSConfig  # (imports ssl: only when asked for)

        # The files loaded, and a handshake in memory, as run will make them; then the
        # certificate checked against each host this machine is dialled at (_dialled).
        config = TLSConfig(spec.tls.cert, spec.tls.key, spec.tls.ca)
        try:
            config.verify()
            for host, where, hint in _dialled(spec, tls_hosts):
                try:
                    config.verify(host, where, hint)
                except ConfigError as e:
                    p.add_error(e, e.key)
        except ConfigError as e:
            p.add_error(e, e.key)
    return spec


_OTHER_HOSTS = ("; on another host of the cluster, whose certificate names the host that "
                "one is dialled at (a worker's host: the address its workers register, from "
                "their --listen, else listen_host), check with `polybus check --host NAME`")


def _dialled(spec: ClusterSpec, tls_hosts: TLSHosts) -> list[tuple[str, str, str]]:
    """(host, what it is, a hint to add) for each host the certificate must name."""
    if tls_hosts in ("worker", "client"):  # (a worker's wildcard listen_host registers
        return []  # no wildcard; a client listens nowhere)
    if tls_hosts in ("registry", "registry-by-hand") and spec.registry is not None:
        return [(spec.registry.rpartition(":")[0].strip("[]"), "the [cluster] registry's host",
                 _OTHER_HOSTS)]
    found: dict[str, tuple[str, str]] = {}
    if spec.registry is None:  # the local engine: every process listens at listen_host
        host = spec.listen_host
        if host in WILDCARDS and spec.engine in ("mpi", "ray"):
            host = socket.gethostname()  # (what each of their replicas registers: served.py)
        if not (host in WILDCARDS and tls_hosts == "registry-by-hand"):  # (a registry
            found[host] = ("where this cluster's connections go", "")  # by hand on
            # every interface is dialled at an address of its host, not the wildcard)
    if tls_hosts is not None and not isinstance(tls_hosts, str):
        for host in tls_hosts:
            found.setdefault(host, ("the host given by --host", ""))
    return [(host, where, hint) for host, (where, hint) in found.items()]


def _parse_tls(t: Table, base_dir: Path, p: Problems) -> TLSFiles | None:
    table = t.table("tls")
    if table is None:
        return None
    p.unknown_keys(table, TLS_KEYS, "cluster", "tls")
    tt = Table(table, ("cluster", "tls"), p)
    files = {}
    for k in TLS_KEYS:
        v = tt.string(k)
        if v is None:
            if k not in table:
                p.add(f"tls needs {k!r}", t.key("tls"), "tls = { cert = FILE, key = FILE, ca = FILE }")
            return None
        if has_nul(v):  # (the others checked all the same; none used)
            p.add(f"{k} file {v!r} {NUL_SAID}", tt.key(k))
            continue
        files[k] = str(config_file(base_dir, v))
        why = not_a_file(Path(files[k]))  # (found by check, not when run connects)
        if why == "not found":
            p.add(f"{k} file {v!r} not found (looked for {files[k]!r})", tt.key(k))
        elif why is not None:
            at = "" if files[k] == v else f" ({files[k]!r})"
            p.add(f"{k} file {v!r}{at} {why}", tt.key(k))
    return TLSFiles(**files) if len(files) == len(TLS_KEYS) else None
