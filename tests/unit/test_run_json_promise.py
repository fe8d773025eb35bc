"""`runner.jsonable` of a promise left where `wait` does not reach: its value."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from polybus.client.calls import CallRecord
from polybus.client.promise import CallPromise
from polybus.runargs import jsonable


class _Answered:
    def wait(self, rec: CallRecord, timeout: float | None = None) -> Any:
        rec.set_value(4)
        return rec.outcome()


def test_a_promise_is_written_as_its_value() -> None:
    rec = CallRecord(1, SimpleNamespace(interface="f", timeout=None), [], None, 0.0)  # type: ignore[arg-type]
    p = CallPromise(rec, _Answered())  # type: ignore[arg-type]
    assert json.loads(json.dumps(jsonable({"x": [p]}))) == {"x": [4]}
