"""The validated, bound configuration: what `polybus.config.load` returns.

Everything here is plain, immutable data; nothing starts a process. Times are seconds,
sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from polybus.config.origin import written_by
from polybus.errors import ConfigError
from polybus.transport.spinning import SPIN_S

CallKind = Literal["sync", "async", "async-demand"]


@dataclass(frozen=True)
class CallStyle:
    """``sync`` | ``async`` | ``async-demand(N)`` | ``async-demand(auto)``."""

    kind: CallKind = "sync"
    window: int | None = None  # async-demand only: N outstanding per replica; None = auto

    def __str__(self) -> str:
        if self.kind != "async-demand":
            return self.kind
        return f"async-demand({'auto' if self.window is None else self.window})"


#: What a migration condition may compare a replica's ``load`` with besides a whole
#: number: the loads of the module's live replicas in the snapshot migration decides on
#: (client/policies/migration.py, `load_names`), and ``peer``, the other end's of the path.
LOAD_NAMES = ("mean", "min", "max", "total", "peer")


@dataclass(frozen=True, repr=False)
class Condition:
    """A migration trigger such as ``load>=10``: ``load`` is the replica's waiting calls.

    With a ``name`` (one of `LOAD_NAMES`) the load is compared with global load
    information, ``factor * <name> + value`` (``load>=2*mean+1``); without one, with the
    whole number ``value`` alone."""

    op: Literal["<", "<=", "==", "!=", ">=", ">"]
    value: int
    name: str | None = None
    factor: float = 1.0

    def bound(self, names: Mapping[str, float] | None = None) -> float:
        """What the load is compared with; ``names`` gives each load name's value."""
        if self.name is None:
            return self.value
        if names is None or self.name not in names:
            raise ValueError(f"condition {self} needs the value of {self.name!r}")
        return self.factor * names[self.name] + self.value

    def holds(self, load: int, names: Mapping[str, float] | None = None) -> bool:
        bound = self.bound(names)
        match self.op:
            case "<":
                return load < bound
            case "<=":
                return load <= bound
            case "==":
                return load == bound
            case "!=":
                return load != bound
            case ">=":
                return load >= bound
            case _:
                return load > bound

    def __str__(self) -> str:
        """As written in ``replication``: ``load>=10``, ``load<mean``, ``load>2*peer-1``."""
        if self.name is None:
            return f"load{self.op}{self.value}"
        factor = "" if self.factor == 1 else f"{self.factor:g}*"
        offset = f"{self.value:+d}" if self.value else ""
        return f"load{self.op}{factor}{self.name}{offset}"

    def __repr__(self) -> str:
        plain = f"Condition(op={self.op!r}, value={self.value!r}"
        if self.name is None:
            return plain + ")"
        return f"{plain}, name={self.name!r}, factor={self.factor!r})"


@dataclass(frozen=True)
class ReplicaSpec:
    """One replica of a module. ``host`` is None for the local engine."""

    name: str
    speed: float = 1.0  # 0 < speed <= 1; a call lasts real duration / speed
    host: str | None = None
    overload: Condition | None = None   # oc=(...) : sender-initiated migration
    underload: Condition | None = None  # uc=(...) : receiver-initiated migration


@dataclass(frozen=True)
class MigrationPath:
    """Calls may move between ``a`` and ``b`` (both directions), ``fraction`` at a time."""

    a: str
    b: str
    fraction: float = 0.5


@dataclass(frozen=True)
class DefineSpec:
    """Server-side options of one interface (``define.<iface>``)."""

    priority: str | None = None          # expression source; compiled by config.expr
    pool: int = 1                        # calls run at once on a replica
    pool_kind: Literal["threads", "processes"] = "threads"
    queue: int = 1000                    # bound of the replica's waiting calls
    overflow: Literal["block", "reject"] = "block"
    cache: tuple[str, ...] | Literal["auto"] | None = None
    cache_bytes: int = 512 * 1024 * 1024
    prefetch: Literal["all"] | None = None
    timeout: float | None = None
    idempotent: bool = True
    cache_bytes_set: bool = False  # given in the file or by --set (not the default)
    # No define names the interface: filled in for it (sourcecheck.define_all: with what
    # the named ones ask of the whole queue; bind.build: the defaults). A check blames
    # only what was written, and a replica says which define bounds its queue.
    filled: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class UseSpec:
    """Client-side options of one used interface (``use.<iface>``)."""

    callstyle: CallStyle = field(default_factory=CallStyle)
    loadratio: tuple[float, ...] | None = None
    balance: Literal["none", "steal", "least"] = "none"
    aggregate: int | None = None         # calls per batch
    aggregate_bytes: int | None = None   # or bytes per batch
    linger: float = 0.001
    timeout: float | None = None
    transport: str | None = None         # overrides the target module's transport
    # Unanswered promise arguments go replica to replica; "keep": large answers stay on
    # their replicas too, answered or not (config/forwardopt.py)
    forward: bool | Literal["keep"] = True
    # `check` and `run` refuse a call of this name the served function cannot take, as
    # the client's source shows it (config/callargs.py); false leaves its calls to fail
    # where they run, for a call the reader takes for one the run makes and it does not
    check_calls: bool = True


@dataclass(frozen=True)
class ModuleSpec:
    """One ``[modules.<key>]`` table."""

    key: str
    source: Path                                   # absolute
    replication: tuple[ReplicaSpec, ...] = ()      # empty for a pure client module
    # ``replication`` given as names (a string, ``"server-0"`` too), not as a count: the
    # replicas a run takes of those registered by hand are those names, not its turn's
    # (client/choosing.py `places`)
    named: bool = False
    # ``replication = 0``: no replicas; every interface bound to it is called in the
    # client process, in the calling thread, as a plain call (client/inclient.py)
    in_client: bool = False
    migration: tuple[MigrationPath, ...] = ()
    define: dict[str, DefineSpec] = field(default_factory=dict)
    use: dict[str, UseSpec] = field(default_factory=dict)
    entrypoint: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    transport: Literal["tcp", "ipc", "shm"] = "tcp"
    pickle: bool = False
    spin: float = SPIN_S   # a waiting reader polls this long before it sleeps
    coalesce: float = 0.0  # over shm: a replica holds back its answers' bells this long at most
    # ``cpus``: one set of CPUs for every replica (or the client), or one per replica,
    # cycled (config/cpus.py); () : not pinned
    cpus: tuple[frozenset[int], ...] = ()

    def cpus_of(self, replica: str | None) -> frozenset[int] | None:
        """The CPUs ``replica`` (a name; None: the client) is pinned to, None if none:
        its own set when ``cpus`` gives one per replica and the name is one of
        ``replication``'s, else every CPU ``cpus`` names."""
        if not self.cpus:
            return None
        names = [r.name for r in self.replication]
        if len(self.cpus) > 1 and replica in names:
            return self.cpus[names.index(replica) % len(self.cpus)]
        return frozenset().union(*self.cpus)

    @property
    def cache_bytes(self) -> int:
        """Its replicas' operand cache bound: one cache for all its interfaces, bounded by
        the largest ``cache_bytes`` of those that cache (one that caches nothing has the
        default, which would otherwise win); when none does (a cache of `broadcast`
        operands only), the largest that one of them sets, else the default."""
        defines = list(self.define.values())
        chosen = ([d for d in defines if d.cache]
                  or [d for d in defines if d.cache_bytes_set])
        if not chosen:
            return DefineSpec.cache_bytes
        return max(d.cache_bytes for d in chosen)


@dataclass(frozen=True)
class Binding:
    """``"client.compare" = "server.compare"``."""

    user: str        # client module key
    name: str        # the name the client passes to use()
    module: str      # serving module key
    interface: str   # interface name on the serving module


@dataclass(frozen=True)
class TLSFiles:
    """``[cluster] tls = { cert, key, ca }``: absolute paths of PEM files."""

    cert: str
    key: str
    ca: str


@dataclass(frozen=True)
class ClusterSpec:
    """``[cluster]``: where the parts meet and how long silence means death."""

    engine: Literal["local", "hosts", "mpi", "ray"] = "local"
    registry: str | None = None       # HOST:PORT of a running registry; None = embedded
    listen_host: str = "127.0.0.1"
    heartbeat: float = 1.0            # seconds between heartbeats
    max_frame: int = 1 << 30          # bytes
    token_file: str | None = None
    tls: TLSFiles | None = None       # mutual TLS for every connection (transport/tls.py)


@dataclass(frozen=True)
class RouteSpec:
    """One ``[serve.routes]`` entry: ``"GET /api" = "web.api"`` or a table with ``to``."""

    key: str                     # as written
    method: str | None           # None: any method
    path: str                    # "/api": itself and everything below it
    module: str                  # serving module key
    interface: str
    use: UseSpec = field(default_factory=lambda: UseSpec(CallStyle("async")))
    fields: tuple[str, ...] = ()  # request fields the handler takes (filled in by bind)


@dataclass(frozen=True)
class ServeSpec:
    """``[serve]``: the HTTP front door of `polybus serve`. Sizes in bytes, times in s."""

    listen: str = "127.0.0.1:8080"
    routes: tuple[RouteSpec, ...] = ()
    max_body: int = 1 << 20
    max_head: int = 64 * 1024
    max_connections: int = 1024       # more wait to be accepted: backpressure
    idle_timeout: float = 30.0        # a keep-alive connection silent this long is closed
    head_timeout: float = 10.0        # a request head not whole this long after it began: 408
    min_body_rate: int = 1024         # bytes/s a body may fall head_timeout behind: then 408
    tracebacks: bool = False          # 500 bodies carry the remote traceback
    grace: float = 5.0                # on SIGINT/SIGTERM, requests in flight may finish
    restart: bool = True              # local workers that end on their own start again
    restart_pause: float = 0.5        # the first pause before one does (engines/supervise.py)

    def interfaces_of(self, module: str) -> list[str]:
        """The interfaces of ``module`` that routes call (served in HTTP form too)."""
        return list(dict.fromkeys(r.interface for r in self.routes if r.module == module))


@dataclass(frozen=True)
class AppConfig:
    path: Path
    modules: dict[str, ModuleSpec]
    bindings: tuple[Binding, ...]
    client: str                        # the module key with the entrypoint ("" if none)
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    serve: ServeSpec | None = None     # [serve]: the HTTP front door
    # Warnings: likely mistakes the files cannot prove (a binding nothing uses)
    notes: tuple[ConfigError, ...] = ()
    # The dotted keys the overrides wrote, and their label (``--set``, ``overrides``):
    # where a mistake found after loading (by an engine) is said to be, as one found
    # loading is (problems.py). Not part of the configuration: not compared.
    overridden: tuple[str, ...] = field(default=(), compare=False)
    overrides_label: str = field(default="", compare=False)

    def origin(self, key: str) -> str:
        """Where the value at ``key`` came from: the overrides' label, or the file."""
        return self.overrides_label if written_by(self.overridden, key) else str(self.path)

    def binding(self, user: str, name: str) -> Binding | None:
        for b in self.bindings:
            if b.user == user and b.name == name:
                return b
        return None

    def servers(self) -> list[ModuleSpec]:
        """Modules that have replicas to start, in configuration order."""
        return [m for m in self.modules.values() if m.replication]
