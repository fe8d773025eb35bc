"""The summary of a run, as `polybus run` writes it to stderr (a table of the replicas,
a line of totals, a line for each binding whose strategies did something) and as
`RunResult.summary` gives it from Python."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from polybus.cli.output import UNBOUNDED
from polybus.client.stats import ReplicaStats
from polybus.plural import plural
from polybus.runner import RunResult
from polybus.transport.endpoints import Address
from polybus.transport.reach import on_this_host

__all__ = ["caption", "has_table", "strategies", "summary", "text"]


def text(r: RunResult) -> str:
    """The whole summary as plain text, at the table's natural width (no terminal's
    colours, and no notebook's rich display, which would show it instead of returning
    it)."""
    out = io.StringIO()
    if has_table(r):
        Console(file=out, width=UNBOUNDED, force_terminal=False, force_jupyter=False,
                color_system=None).print(summary(r))
    return out.getvalue() + "".join(line + "\n" for line in [caption(r), *strategies(r)])


def has_table(r: RunResult) -> bool:
    """Whether the summary shows its table of replicas: not when every module of the run
    has replication = 0 (no replica, its calls made in the client: `strategies` says
    them)."""
    return bool(r.replicas) or not r.in_client


def caption(r: RunResult) -> str:
    return (f"elapsed {r.elapsed_s:.4f} s (start-up {r.startup_s:.2f} s apart), "
            f"{plural(r.calls, 'call')}, sent {r.bytes_sent:,} B, "
            f"received {r.bytes_received:,} B")


def summary(r: RunResult) -> Table:
    t = Table()
    # Replica names whole (workers started by hand are named module-host-pid): rich
    # would cut them to fit 80 columns when stderr is not a terminal.
    names = [rep.name + (" (lost)" if rep.lost else "") for rep in r.replicas]
    t.add_column("replica", no_wrap=True, min_width=max(map(len, names), default=7))
    # Its host, when a replica is on another (workers started by hand at a registry):
    # a column only then, "here" for those on this one
    hosts = _hosts(r.replicas)
    if any(hosts):
        t.add_column("host", no_wrap=True)
    t.add_column("via")  # (the transport of each of its connections: client/stats.py)
    # A replica's pool, when one runs calls at once: busy % is of its handlers' time
    # (44% of a pool of 2 read as half idle, with the pool nowhere said)
    pooled = any(rep.handlers > 1 for rep in r.replicas)
    for col in ("speed", *(("pool",) if pooled else ()), "calls", "moved in", "moved out",
                "busy s", "busy %", "queue wait s"):
        t.add_column(col, justify="right")
    for rep, name, host in zip(r.replicas, names, hosts, strict=True):
        # A lost replica cannot be asked how long it was busy: not known (None), not 0.
        busy = None if rep.busy_fraction is None else 100.0 * rep.busy_fraction
        times = [_figure(rep.busy_s, ".4f"), _figure(busy, ".0f"),
                 _figure(rep.queue_wait_s, ".4f")]
        t.add_row(name, *((_host_cell(host),) if any(hosts) else ()),
                  "+".join(rep.transports) or "?", f"{rep.speed:g}",
                  *((str(rep.handlers),) if pooled else ()), str(rep.calls),
                  str(rep.migrated_in), str(rep.migrated_out), *times)
    return t


def strategies(r: RunResult) -> list[str]:
    """A line for each binding whose strategies did something (client/counts.py), and
    one for `broadcast`; none for a run with no strategy on (forwarding aside: it is on
    by default)."""
    lines = [f"{key}: 0 replicas, {plural(calls, 'call')} in the client"
             for key, calls in r.in_client.items()]  # (replication = 0: no replica row)
    for name, c in r.interfaces.items():
        said = [text for n, text in (
            (c.get("batches", 0), f"{plural(c.get('batches', 0), 'batch', 'batches')} "
                                  f"({plural(c.get('batched_calls', 0), 'call')})"),
            (c.get("operands_put", 0), f"{plural(c.get('operands_put', 0), 'operand')} put"),
            (c.get("operands_named", 0),  # ("operands" said once: by the first)
             f"{c.get('operands_named', 0)} named" if c.get("operands_put", 0)
             else f"{plural(c.get('operands_named', 0), 'operand')} named"),
            (c.get("cache_misses", 0), plural(c.get("cache_misses", 0), "cache miss",
                                              "cache misses")),
            (c.get("forwarded", 0), f"{c.get('forwarded', 0)} forwarded"),
            (c.get("through_client", 0), f"{c.get('through_client', 0)} through the client"),
            (c.get("refused", 0), f"{c.get('refused', 0)} refused (queue full)"),
            (c.get("cancelled", 0), f"{c.get('cancelled', 0)} cancelled"),
            (c.get("run_again", 0), f"{c.get('run_again', 0)} run again (a replica lost)"),
        ) if n]
        if said:
            lines.append(f"{name}: {', '.join(said)}")
    values = r.broadcasts.get("values", 0)
    if values:
        lines.append(f"broadcast: {plural(values, 'value')}, "
                     f"{plural(r.broadcasts.get('puts', 0), 'Put')} to replicas")
    return lines


def _hosts(replicas: list[ReplicaStats]) -> list[str | None]:
    """Each replica's host as its client dialled it (its first TCP address's); "" for
    one on this host (its loopback, its name, an address of its own; its ipc and shm are
    on it); None for one whose address is not known."""
    seen: dict[str, bool] = {}  # (a host looked at once: a name may be resolved)
    out: list[str | None] = []
    for rep in replicas:
        host = next((Address.parse(a).host for a in rep.addresses
                     if a.startswith("tcp://")), "")
        if host and host not in seen:
            seen[host] = on_this_host(host)
        out.append(None if not rep.addresses else "" if not host or seen[host] else host)
    return out


def _host_cell(host: str | None) -> str:
    return "?" if host is None else host or "here"


def _figure(value: float | None, spec: str) -> str:
    """A replica's figure as the summary shows it; ``?`` for one not known (None)."""
    return "?" if value is None else format(value, spec)
