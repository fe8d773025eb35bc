"""Whether a benchmark's JSON is as polybus writes one (bench/report.py), field by field.

`fault` names the first field that is not: the results page and ``polybus bench
--compare`` then say the file and that field. (Fields read only with ``str()`` are not
checked: any value says itself.) Only the types are checked, not the values: a NaN is a
number, as JSON written by Python can hold one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["fault"]

_ROW = (("system", str), ("config", dict), ("x", float), ("metric", str),
        ("median", float), ("min", float), ("max", float), ("n", int))
_PARAMS = (("versions", dict), ("skipped", dict), ("notes", list), ("x_labels", dict),
           ("baselines", dict))
_KINDS = {str: "a string", dict: "an object", list: "a list", float: "a number",
          int: "a whole number"}


def _is(value: object, kind: type) -> bool:
    if isinstance(value, bool):  # (JSON's true is no number)
        return False
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _field(where: str, value: object, kind: type) -> str | None:
    if _is(value, kind):
        return None
    return f"{where} is not {_KINDS[kind]}: {value!r}"[:200]


def _fields(where: str, item: object, fields: tuple[tuple[str, type], ...],
            required: bool) -> str | None:
    if not isinstance(item, dict):
        return _field(where, item, dict)
    for key, kind in fields:
        if key not in item:
            if required:
                return f"{where} has no {key!r}"
            continue
        bad = _field(f"{where}.{key}", item[key], kind)
        if bad is not None:
            return bad
    return None


def fault(raw: Mapping[str, Any]) -> str | None:
    """The first field of ``raw`` (a JSON object with ``bench`` and ``rows``) not as
    polybus writes it, said with where it is (``ratios[3].value is not a number:
    'fast'``); None if there is none."""
    for key, kind, required in (("bench", str, True), ("rows", list, True),
                                ("ratios", list, False), ("machine", dict, False),
                                ("params", dict, False)):
        if key in raw or required:
            bad = _field(key, raw.get(key), kind)
            if bad is not None:
                return bad
    for i, row in enumerate(raw["rows"]):
        bad = _fields(f"rows[{i}]", row, _ROW, required=True)
        if bad is not None:
            return bad
    for i, ratio in enumerate(raw.get("ratios", [])):
        bad = _fields(f"ratios[{i}]", ratio, (("name", str), ("value", float)), required=True)
        if bad is not None:
            return bad
    return _fields("params", raw.get("params", {}), _PARAMS, required=False)
