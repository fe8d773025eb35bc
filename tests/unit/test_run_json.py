"""`polybus run --json`: the result as JSON that any parser reads, whatever it holds."""

from __future__ import annotations

import datetime
import json
import math

import numpy as np

from polybus.runargs import jsonable
from polybus.runner import RunResult


def _strict(x: object) -> object:
    """``x`` written as strict JSON (no NaN or Infinity, which JSON has no form for)."""
    return json.loads(json.dumps(x, allow_nan=False))


def test_an_array_of_dates_or_objects_is_written_not_a_traceback() -> None:
    # .tolist() gave datetime.date and set objects, and json.dump raised TypeError after
    # the run, leaving a file cut off after '"result": '.
    dates = np.array(["2024-01-01"], dtype="datetime64[D]")
    objs = np.array([{1, 2}, None], dtype=object)
    assert _strict(jsonable(dates)) == [repr(datetime.date(2024, 1, 1))]
    assert _strict(jsonable(objs)) == ["{1, 2}", None]
    r = RunResult({"d": dates, "o": objs}, 0.5, 1.0, 0, 0, 0)
    assert _strict(r.to_json())["result"] == {"d": ["datetime.date(2024, 1, 1)"],
                                              "o": ["{1, 2}", None]}


def test_nan_and_infinity_are_strings_not_invalid_json() -> None:
    # json.dump wrote "result": NaN, which jq, JavaScript and strict parsers refuse.
    assert _strict(jsonable(math.nan)) == "nan"
    assert _strict(jsonable([math.inf, -math.inf, 1.5])) == ["inf", "-inf", 1.5]
    assert _strict(jsonable(np.array([1.0, np.nan]))) == [1.0, "nan"]
    assert _strict(jsonable(np.float32("nan"))) == "nan"
    assert _strict(jsonable({"x": (2, 3.0)})) == {"x": [2, 3.0]}


def test_a_result_that_cannot_be_copied_is_written_as_its_repr() -> None:
    # to_json took asdict() of the whole result, which deep-copies it first: a lock
    # (or a socket, a generator) raised TypeError there, before jsonable saw it.
    import threading

    lock = threading.Lock()
    r = RunResult({"lock": lock, "x": [1.5]}, 0.5, 1.0, 2, 3, 4)
    d = _strict(r.to_json())
    assert isinstance(d, dict)
    assert d["result"] == {"lock": repr(lock), "x": [1.5]}
    assert (d["elapsed_s"], d["calls"], d["bytes_received"], d["replicas"]) == (0.5, 2, 4, [])


def test_bytes_are_written_as_their_repr_not_passed_off_as_text() -> None:
    # (they were decoded as Latin-1: b"\xffab" came out as "\u00ffab", a str result's twin)
    assert _strict(jsonable([b"\xffab", "\u00ffab"])) == ["b'\\xffab'", "\u00ffab"]


def test_an_object_that_claims_to_be_an_int_is_written_not_a_traceback() -> None:
    # A promise passes isinstance(p, int) as its answer: jsonable kept it as an int and
    # json.dumps raised "descriptor '__repr__' requires a 'int' object but received a
    # 'CallPromise'" after the run. Types are checked as they are; a promise is its value.
    from polybus.cli.cmd_run import write_json

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return int

        def __repr__(self) -> str:
            return "Liar()"

    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert isinstance(Liar(), int)
    assert _strict(jsonable([Liar(), BadRepr()])) == [
        "Liar()", "<BadRepr: repr raised RuntimeError: no>"]
    import io

    out = io.StringIO()
    write_json("-", {"result": (Liar(),)}, out)
    assert json.loads(out.getvalue()) == {"result": ["Liar()"]}
