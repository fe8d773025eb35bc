"""``cpus``: the CPUs a module's processes run on (Linux's CPU affinity; what MPI's
``--bind-to`` and ``taskset`` set), a placement choice made in the configuration alone.

Written on a module::

    cpus = [1]           # each replica of this module runs on CPU 1 only
    cpus = [0, 1]        # ... on CPU 0 or 1, as the kernel chooses
    cpus = "0-3,6"       # ... on CPUs 0 to 3 and 6 (a CPU list, as taskset -c takes it)
    cpus = [[0], [1]]    # replica i on list i (cycled: replica 2 on [0] again)
    cpus = []            # not pinned (the default)

On the module with the entrypoint it pins the client: the whole process that runs the
program, every thread of it, for the run's length (pinning.py). On these machines a
wake-up on another CPU costs tens of microseconds, so small calls gain when the client
and its replicas share CPUs in the right way, and lose when a busy replica and a busy
client share one; docs/tuning.md, "Placement: `cpus`", gives the measured rows.

Only the numbers are checked here: whether a CPU exists is a fact of the machine the
process runs on, checked there as it starts (pinning.py).
"""

from __future__ import annotations

import os
import re
from typing import Any

from polybus.config.units import shown
from polybus.errors import ConfigError

__all__ = ["CPUS_FORMS", "MAX_CPU", "can_pin", "cpu_list", "parse_cpus", "read_cpu_list"]

CPUS_FORMS = ("a list of CPU numbers such as [1] or [0, 1] (every replica may run on any of "
              "them), or one list per replica such as [[0], [1]] (replica i on list i, "
              "cycled), or a CPU list as taskset -c takes it, such as \"0-3,6\"; [] for none")

MAX_CPU = (1 << 16) - 1  # a sanity bound: Linux builds take at most 8192 CPUs
_DIGITS = re.compile(r"[0-9]+")


def parse_cpus(value: Any) -> tuple[frozenset[int], ...]:
    """``cpus`` as written: one set per list given (a flat list is one), () for ``[]``.
    ConfigError with what is wrong and where in the value."""
    if isinstance(value, str):
        return (_one(read_cpu_list(value), ""),)
    if not isinstance(value, list):
        count = type(value) is int and value >= 1  # (Ray's num_cpus, docker --cpus)
        first = f'"0-{value - 1}" the first {value}' if count and value > 1 else '"0" the first'
        raise ConfigError(f"expected {CPUS_FORMS}, got {shown(value)}", hint=(
            f"cpus names CPUs, not a count of them: [{value}] is CPU {value} alone, "
            f"{first}") if count else None)
    if not value:
        return ()
    lists = [isinstance(v, list) for v in value]
    if all(lists):
        return tuple(_one(v, f"list {i} ") for i, v in enumerate(value))
    if any(lists):
        raise ConfigError(f"cpus mixes numbers and lists: {shown(value)}",
                          hint="either one list of CPU numbers, or a list of lists "
                               "(one per replica)")
    return (_one(value, ""),)


def _one(items: list[Any], where: str) -> frozenset[int]:
    if not items:
        raise ConfigError(f"cpus {where}is empty", hint="give at least one CPU number")
    for x in items:
        if isinstance(x, bool) or not isinstance(x, int):
            raise ConfigError(f"cpus {where}holds {shown(x)}, not a CPU number",
                              hint="CPU numbers are whole numbers from 0, as `nproc` "
                                   "and /proc/cpuinfo count them")
        if not 0 <= x <= MAX_CPU:
            raise ConfigError(f"cpus {where}holds {x}, not a CPU number",
                              hint=f"CPU numbers are from 0 to at most {MAX_CPU}")
    return frozenset(items)


def can_pin() -> bool:
    """This system can restrict a process to CPUs (Linux; not macOS)."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


def read_cpu_list(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]`` (Linux's cpulist form, as ``taskset -c`` takes);
    ConfigError saying which part is not a CPU or a range of them."""
    out: list[int] = []
    for part in text.split(","):
        lo, dash, hi = (x.strip() for x in part.partition("-"))
        if not _DIGITS.fullmatch(lo) or (dash and not _DIGITS.fullmatch(hi)) or (
                dash and int(hi) < int(lo)):
            raise ConfigError(f"cpus {text!r}: {part.strip()!r} is not a CPU number or a "
                              "range of them", hint='a CPU list such as "1" or "0-3,6", as '
                                                    "taskset -c takes it, or a list [0, 1]")
        if int(hi or lo) > MAX_CPU:
            raise ConfigError(f"cpus {text!r}: {hi or lo} is not a CPU number",
                              hint=f"CPU numbers are from 0 to at most {MAX_CPU}")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def cpu_list(cpus: frozenset[int] | set[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"`` (Linux's cpulist form, as ``taskset -c`` takes)."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(_span(run))
            run = []
        run.append(c)
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"

