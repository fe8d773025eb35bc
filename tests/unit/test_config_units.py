"""Sizes and durations."""

from __future__ import annotations

import pytest

from polybus.config import parse_duration, parse_size
from polybus.config.units import duration_text
from polybus.errors import ConfigError


@pytest.mark.parametrize(("text", "expected"), [
    (0, 0),
    (4096, 4096),
    ("4096", 4096),
    ("512MiB", 512 * 1024**2),
    ("64KiB", 64 * 1024),
    ("1GB", 10**9),
    ("1GiB", 1 << 30),
    ("2 MB", 2_000_000),
    ("10B", 10),
    ("1.5KiB", 1536),
    ("1kib", 1024),
    ("1M", 1 << 20),
    ("2TiB", 2 << 40),
    (8.0, 8),
    # (up to the unit the bound is said in: "7EiB" was "not a size")
    ("1PiB", 1 << 50),
    ("1PB", 10**15),
    ("3p", 3 << 50),
    ("7EiB", 7 << 60),
    ("1EB", 10**18),
    ("7.5 eib", 15 << 59),
    # (strings are read exactly, not through a float: 2**53 + 1 was 2**53)
    ("9007199254740993", (1 << 53) + 1),
    ("9223372036854775806", (1 << 63) - 2),
    ("1e-999999999KiB", 0),  # (a unit's fraction rounds to a whole byte)
    ("1e3", 1000),
])
def test_sizes(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "MiB", "12 parsecs", "--1KiB", "1..2KB", "KiB12",
                                 "1ZiB", "1e"])
def test_bad_size_strings(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a size") as info:
        parse_size(bad)
    assert info.value.hint is not None and "64KiB" in info.value.hint


@pytest.mark.parametrize("bad", [True, None, [1], 1.5, -3])
def test_bad_size_values(bad: object) -> None:
    with pytest.raises(ConfigError):
        parse_size(bad)


@pytest.mark.parametrize(("value", "message"), [
    ("1e308TiB", "a size must be less than 8 EiB (2**63 bytes), got '1e308TiB'"),
    (1 << 63, "a size must be less than 8 EiB (2**63 bytes), got 9223372036854775808"),
    (10**400, "a size must be less than 8 EiB (2**63 bytes), got 1000000000000000000000000"
              "000000000000..."),
    (float("inf"), "a size must be less than 8 EiB (2**63 bytes), got inf"),
    (float("nan"), "not a size: nan"),
    (-1, "a size must not be negative, got -1"),
    ("-5MiB", "a size must not be negative, got '-5MiB'"),
    ("8EiB", "a size must be less than 8 EiB (2**63 bytes), got '8EiB'"),
    ("10EB", "a size must be less than 8 EiB (2**63 bytes), got '10EB'"),
    ("9223372036854775808", "a size must be less than 8 EiB (2**63 bytes), got "
                            "'9223372036854775808'"),
    ("1e999999999EiB", "a size must be less than 8 EiB (2**63 bytes), got '1e999999999EiB'"),
    # a fraction of a byte is refused as a number's is (1.5): "1.5" was rounded to 2
    ("1.5", "a size in bytes must be whole, got '1.5'"),
    ("1e-999999999", "a size in bytes must be whole, got '1e-999999999'"),
])
def test_sizes_out_of_range_say_so(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_size(value)
    assert info.value.bare_message == message


def test_the_largest_size() -> None:
    # (as a string too: through a float it rounded up to 2**63 and was refused)
    assert parse_size((1 << 63) - 1) == parse_size(str((1 << 63) - 1)) == (1 << 63) - 1


@pytest.mark.parametrize(("text", "expected"), [
    (5, 5.0),
    (0.25, 0.25),
    ("5s", 5.0),
    ("1ms", 0.001),
    ("250us", 250e-6),
    ("250µs", 250e-6),
    ("100ns", 100e-9),
    ("2m", 120.0),
    ("1h", 3600.0),
    ("1.5", 1.5),
    ("0", 0.0),
    ("+1ms", 0.001),
    ("-0s", 0.0),
])
def test_durations(text: object, expected: float) -> None:
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["", "5 fortnights", "s", "--1s", "- 1s", "1e"])
def test_bad_duration_strings(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a duration") as info:
        parse_duration(bad)
    assert info.value.hint is not None and "250us" in info.value.hint


@pytest.mark.parametrize("bad", [False, None, {}, -0.5])
def test_bad_duration_values(bad: object) -> None:
    with pytest.raises(ConfigError):
        parse_duration(bad)


@pytest.mark.parametrize(("value", "message"), [
    (float("inf"), "a duration must be finite, got inf"),
    ("1e308h", "a duration must be finite, got '1e308h'"),
    (10**400, "a duration must be finite, got 1000000000000000000000000000000000000..."),
    (float("nan"), "not a duration: nan"),
    (float("-inf"), "a duration must not be negative, got -inf"),
    # a sign was "not a duration": the number was right, its sign was not
    ("-1ms", "a duration must not be negative, got '-1ms'"),
    ("-.5s", "a duration must not be negative, got '-.5s'"),
])
def test_durations_out_of_range_say_so(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration(value)
    assert info.value.bare_message == message


@pytest.mark.parametrize(("seconds", "text"), [
    (1e-6, "1 us"), (250e-6, "250 us"), (2e-3, "2 ms"), (0.5, "0.5 s"), (1.5, "1.5 s"),
    (120.0, "120 s"), (0.0, "0 s"),
])
def test_durations_in_messages_read_as_written(seconds: float, text: str) -> None:
    """A timeout of "1us" is said as 1 us in its error, not 1e-06 s."""
    assert duration_text(seconds) == text
    assert parse_duration(text.replace(" ", "")) == pytest.approx(seconds)
