"""The columns of a metric's table, shared by the terminal table (report.print_table)
and the results page (results.py): how a wide table is split by a configuration key,
and what a column is called once the keys its table states are left out of it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.bench.report import Row

__all__ = ["MAX_COLUMNS", "constant_keys", "label", "split"]

#: a metric's table with more columns than this is split by a configuration key (below)
MAX_COLUMNS = 12


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def label(row: Row, fixed: Sequence[str]) -> str:
    """The column name of ``row`` in a table whose heading already names ``fixed`` keys."""
    config = {k: v for k, v in row.config.items() if k not in fixed}
    if not config:
        return row.system
    return f"{row.system} " + ",".join(f"{k}={v}" for k, v in config.items())


def constant_keys(rows: Sequence[Row], fixed: Sequence[str] = ()) -> list[str]:
    """``key=value`` for each configuration key (not in ``fixed``) that every one of
    ``rows`` has, with one value: a table can say it once, above its columns."""
    if not rows:
        return []
    out = []
    for key, value in rows[0].config.items():
        if key not in fixed and all(key in r.config and r.config[key] == value for r in rows):
            out.append(f"{key}={value}")
    return out


def split(rows: list[Row], fixed: tuple[str, ...], depth: int = 2, most: int = MAX_COLUMNS
          ) -> list[tuple[tuple[str, ...], list[Row]]]:
    """Tables of at most ``most`` columns where a configuration key allows. Rows are
    grouped by one key's values; a row without that key (a baseline) goes in every
    group. The key chosen gives the narrowest widest table, among keys that make at most
    six tables and repeat few columns (at most half as many again as there were):
    matmul splits by ``n`` and then by ``mode``. Returns (heading keys, rows) per table."""
    width = len(_unique(label(r, fixed) for r in rows))
    if depth == 0 or width <= most:
        return [(fixed, rows)]
    best: tuple[int, int, str, list[str]] | None = None
    for key in _unique(k for r in rows for k in r.config if k not in fixed):
        values = _unique(str(r.config[key]) for r in rows if key in r.config)
        if not 2 <= len(values) <= 6:
            continue
        keys = (*fixed, key)
        widths = [len(_unique(label(r, keys) for r in rows
                              if key not in r.config or str(r.config[key]) == v))
                  for v in values]
        if 2 * sum(widths) > 3 * width:
            continue
        if best is None or (max(widths), len(values)) < best[:2]:
            best = (max(widths), len(values), key, values)
    if best is None:
        return [(fixed, rows)]
    _, _, key, values = best
    out = []
    for v in values:
        group = [r for r in rows if key not in r.config or str(r.config[key]) == v]
        out += split(group, (*fixed, f"{key}={v}"), depth - 1, most)
    return out
