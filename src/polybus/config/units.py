"""Sizes and durations as people write them: ``"512MiB"``, ``"64KiB"``, ``"5s"``, ``"250us"``.

A plain number is bytes (sizes) or seconds (durations). Both parsers raise ConfigError
without a file or key; the caller places it.
"""

from __future__ import annotations

import decimal
import math
import re

from polybus.errors import ConfigError

__all__ = ["duration_text", "parse_duration", "parse_size", "shown"]

# Up to the exa- units, in which the bound (MAX_SIZE) is said: "7EiB" was "not a size"
# while a number past it was "less than 8 EiB". (No "e" alone: "1e" reads as an exponent.)
_SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "pb": 1000**5, "eb": 1000**6,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5,
    "eib": 1024**6,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5,
}
_DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}
_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE][+-]?[0-9]+)?\s*([A-Za-zµ]*)\s*$")

MAX_SIZE = 1 << 63  # sizes are 64-bit: 8 EiB, where a float string such as "1e308TiB" ends
SIZE_FORMS = "a number of bytes or a string such as '64KiB', '512MiB', '1GB'"
DURATION_FORMS = "a number of seconds or a string such as '250us', '1ms', '5s', '2m'"


def shown(value: object) -> str:
    """``value`` as messages quote it: a 400-digit integer is cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _split(text: str) -> tuple[str, str] | None:
    """``text``'s number (as written) and unit, or None if it is not of that form."""
    m = _NUMBER_UNIT.match(text)
    if m is None:
        return None
    return text.strip()[: len(text.strip()) - len(m.group(2))].strip(), m.group(2)


# Sizes written as strings are read exactly (a float rounds "9007199254740993" down and
# "9223372036854775807", the largest size, up past the bound): 40 digits hold any size
# below MAX_SIZE with its fraction, and an exponent such as "1e999999999" costs nothing.
_EXACT = decimal.Context(prec=40, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                         traps=[decimal.InvalidOperation])


def _exact_size(number: str, unit: int) -> decimal.Decimal:
    return _EXACT.multiply(decimal.Decimal(number), decimal.Decimal(unit))


def parse_size(value: object) -> int:
    """Bytes from ``1048576``, ``"1MiB"``, ``"64KiB"``, ``"1GB"`` (KB/MB/GB ... EB are powers
    of 1000, KiB ... EiB of 1024); less than `MAX_SIZE`."""
    said = shown(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"expected a size, got {said}", hint=SIZE_FORMS)
    total: int | float | decimal.Decimal
    if isinstance(value, int):  # (as written: a huge one is no float)
        total = value
    elif isinstance(value, float):
        if math.isfinite(value) and not value.is_integer():
            raise ConfigError(f"a size in bytes must be whole, got {said}", hint=SIZE_FORMS)
        total = value
    else:
        split = _split(value)
        if split is None or split[1].lower() not in _SIZE_UNITS | {"": 1}:
            raise ConfigError(f"not a size: {said}", hint=SIZE_FORMS)
        unit = _SIZE_UNITS[split[1].lower() or "b"]
        total = _exact_size(split[0], unit)
        if unit == 1 and total.is_finite() and total != total.to_integral_value():
            # (as a number's: "1.5" was rounded to 2 bytes where 1.5 was refused; a
            # larger unit's fraction, "1.3MiB", is rounded to a whole byte)
            raise ConfigError(f"a size in bytes must be whole, got {said}", hint=SIZE_FORMS)
    if total != total:  # NaN
        raise ConfigError(f"not a size: {said}", hint=SIZE_FORMS)
    if total < 0:
        raise ConfigError(f"a size must not be negative, got {said}", hint=SIZE_FORMS)
    if total >= MAX_SIZE:  # (infinity too)
        raise ConfigError(f"a size must be less than 8 EiB (2**63 bytes), got {said}",
                          hint=SIZE_FORMS)
    return round(total)  # (half to even, as for a float)


def parse_duration(value: object) -> float:
    """Seconds from ``5``, ``0.25``, ``"250us"``, ``"1ms"``, ``"5s"``, ``"2m"``, ``"1h"``."""
    said = shown(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"expected a duration, got {said}", hint=DURATION_FORMS)
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # (an int past any float)
            seconds = math.inf
    else:
        split = _split(value)
        if split is None or split[1] not in _DURATION_UNITS | {"": 1.0}:
            raise ConfigError(f"not a duration: {said}", hint=DURATION_FORMS)
        seconds = float(split[0]) * _DURATION_UNITS.get(split[1], 1.0)
    if seconds != seconds:  # NaN
        raise ConfigError(f"not a duration: {said}", hint=DURATION_FORMS)
    if seconds < 0:
        raise ConfigError(f"a duration must not be negative, got {said}", hint=DURATION_FORMS)
    if math.isinf(seconds):
        raise ConfigError(f"a duration must be finite, got {said}", hint=DURATION_FORMS)
    return seconds


def duration_text(seconds: float) -> str:
    """``seconds`` as a person writes it: ``"1 us"``, ``"2 ms"``, ``"0.5 s"`` (messages)."""
    for unit, size, least in (("s", 1.0, 0.1), ("ms", 1e-3, 1e-3), ("us", 1e-6, 1e-6)):
        if abs(seconds) >= least:
            return f"{seconds / size:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns" if seconds else "0 s"
