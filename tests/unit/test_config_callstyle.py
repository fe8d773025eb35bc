"""Call styles."""

from __future__ import annotations

import pytest

from polybus.config import parse_callstyle
from polybus.config.model import CallStyle
from polybus.errors import ConfigError


@pytest.mark.parametrize(("text", "expected"), [
    ("sync", CallStyle("sync")),
    ("async", CallStyle("async")),
    ("async-demand(5)", CallStyle("async-demand", 5)),
    ("async-demand(1)", CallStyle("async-demand", 1)),
    ("async-demand( 12 )", CallStyle("async-demand", 12)),
    ("async-demand(auto)", CallStyle("async-demand", None)),
    (" async ", CallStyle("async")),
])
def test_accepted(text: str, expected: CallStyle) -> None:
    assert parse_callstyle(text) == expected


@pytest.mark.parametrize("style", ["sync", "async", "async-demand(5)", "async-demand(auto)"])
def test_round_trip(style: str) -> None:
    assert str(parse_callstyle(style)) == style


@pytest.mark.parametrize("bad", ["Sync", "asynch", "async-demand", "demand(5)", "", "async()"])
def test_unknown(bad: str) -> None:
    with pytest.raises(ConfigError, match="unknown call style") as info:
        parse_callstyle(bad)
    assert info.value.hint is not None
    assert "async-demand(N)" in info.value.hint and "async-demand(auto)" in info.value.hint


@pytest.mark.parametrize("bad", ["async-demand(0)", "async-demand(-2)", "async-demand(x)",
                                 "async-demand(1.5)", "async-demand()"])
def test_bad_window(bad: str) -> None:
    with pytest.raises(ConfigError, match="bad window") as info:
        parse_callstyle(bad)
    assert "'sync'" in (info.value.hint or "")


def test_not_a_string() -> None:
    with pytest.raises(ConfigError, match="expected a call style string"):
        parse_callstyle(5)
