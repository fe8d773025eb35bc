"""The summary `polybus run` prints on stderr, as a log file or a pipe gets it."""

from __future__ import annotations

import io

from rich.console import Console

from polybus.cli.cmd_run import caption, summary
from polybus.cli.output import result_console
from polybus.client.stats import ReplicaStats
from polybus.runner import RunResult


def test_replica_names_and_totals_are_whole_at_80_columns() -> None:
    # Workers started by hand are named module-host-pid; cut to "server-…" two of them
    # could not be told apart, and the totals line broke in the middle of a figure.
    names = ["server-buildhost-123456", "server-buildhost-123457"]
    r = RunResult(None, 0.5, 1.0, 2, 160_166, 160_244,
                  [ReplicaStats(n, calls=1, busy_s=0.1) for n in names])
    out = io.StringIO()
    Console(file=out, width=80).print(summary(r))
    for n in names:
        assert n in out.getvalue()
    assert caption(r) == ("elapsed 0.5000 s (start-up 1.00 s apart), 2 calls, "
                          "sent 160,166 B, received 160,244 B")


def test_a_name_too_long_for_80_columns_is_whole_in_a_log_file() -> None:
    """`polybus run ... 2> log`: stderr is not a terminal, and the table is not cut."""
    name = "server-" + "a-very-long-host-name-of-a-build-farm-machine-" * 2 + "4242"
    r = RunResult(None, 0.5, 1.0, 1, 10, 10,
                  [ReplicaStats(name, calls=1, busy_s=0.1, lost=True)])
    out = io.StringIO()
    result_console(out).print(summary(r))
    assert name in out.getvalue() and "(lost)" in out.getvalue()
    assert "\u2026" not in out.getvalue()


def test_one_call_is_not_one_calls() -> None:
    r = RunResult(None, 0.5, 1.0, 1, 10, 20, [ReplicaStats("server-0", calls=1, busy_s=0.1)])
    assert caption(r) == ("elapsed 0.5000 s (start-up 1.00 s apart), 1 call, "
                          "sent 10 B, received 20 B")
