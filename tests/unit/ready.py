"""Stand-ins the unit tests of nested arguments share (test_nested_handles.py,
test_forward_nested_client.py): a promise already answered, and the link a message is
written for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from polybus.client.promise import Promise

__all__ = ["LINK", "Ready"]

LINK: Any = SimpleNamespace(name="server-0")


class Ready(Promise):
    """A promise already answered (what `wait` and `wire` answer)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        object.__setattr__(self, "v", v)  # (a promise's own setattr sets its value's)

    def __polybus_value__(self) -> Any:
        return self.v
