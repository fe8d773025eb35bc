"""``polybus bench --compare OLD [NEW]``: the comparison of two runs' JSON files
(bench/compare.py), printed, and written as JSON with ``--json FILE`` (``-``: standard
output, the tables then on stderr). It runs nothing; NEW left out is ``results/``."""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

from rich.console import Console

from polybus.cli.values import STDOUT, check_distinct, check_writable, save, write_text
from polybus.errors import UsageError

__all__ = ["DEFAULT_NEW", "run"]

DEFAULT_NEW = "results/"  # (the figures of record: cmd_bench.RECORD_DIR)

# options that run or write benchmarks, which --compare does not
_NOT_WITH = (("name", None), ("quick", "--quick"), ("plot", "--plot"), ("out", "--out"),
             ("page", "--page"), ("page_only", "--page-only"), ("replace", "--replace"),
             ("list", "--list"))


def _warn(message: str) -> None:
    print(f"polybus bench: warning: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace, console: Console) -> int:
    """Compare, print, write --json; 0, or 2 if --json could not be written (said)."""
    from polybus.bench import registry
    from polybus.bench.compare import compare, load_side, print_comparison

    given: list[str] = args.compare
    if len(given) > 2:
        raise UsageError(f"--compare takes OLD and NEW (NEW left out: {DEFAULT_NEW}), and "
                         f"runs nothing; {len(given)} were given: {' '.join(given)}")
    for key, option in _NOT_WITH:
        value = getattr(args, key, None)
        if value:
            said = f"leave out {value!r}" if option is None else f"leave out {option}"
            raise UsageError(f"--compare runs nothing and compares two runs' JSON files; "
                             f"{said}")
    old, new = given[0], given[1] if len(given) == 2 else DEFAULT_NEW
    if len(given) == 1 and not Path(new).is_dir():
        raise UsageError(f"--compare {old}: NEW left out means {DEFAULT_NEW} (the figures "
                         "of record), and there is no such folder here; name NEW")
    old_items = load_side(old, "OLD", registry.names(), _warn)
    new_items = load_side(new, "NEW", registry.names(), _warn)
    if args.json is not None:  # (not one of the files compared: it would replace it)
        check_distinct([("--json", args.json)],
                       [("a file --compare reads", str(path))
                        for _, _, path in (*old_items, *new_items)])
        check_writable(None if args.json == STDOUT else args.json, "--json")
    comparison = compare(old, old_items, new, new_items)
    print_comparison(comparison, console)
    console.file.flush()
    if args.json is None:
        return 0
    write = partial(write_text, lambda: json.dumps(comparison.to_dict(), indent=2) + "\n")
    return 0 if save("bench", "--json", args.json, write) else 2
