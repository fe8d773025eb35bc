"""``aggregate`` as a size too small to batch anything: a warning, not silence. A
new-user trial wrote ``aggregate = "16"`` (meant: 16 calls a batch), which is 16 bytes
of arguments, so every batch held about one call."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

SERVER = "def f(x):\n    return x\n"
CLIENT = "from polybus import use\n\nf = use('f')\n\n\ndef main():\n    return f(1)\n"
TOML = """\
[modules.server]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.f = { callstyle = "async", aggregate = AGGREGATE }

[bind]
"client.f" = "server.f"
"""


def _notes(tmp_path: Path, aggregate: str) -> list[tuple[str | None, str | None, str, str | None]]:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("AGGREGATE", aggregate))
    cfg, errors = validate(str(path))
    assert errors == [] and cfg is not None
    return [(n.file, n.key, n.bare_message, n.hint) for n in cfg.notes]


def test_a_size_of_a_few_bytes_is_a_warning_that_suggests_the_count(tmp_path: Path) -> None:
    (note,) = _notes(tmp_path, '"16"')
    assert note == (
        str(tmp_path / "app.toml"), "modules.client.use.f.aggregate",
        "aggregate is a size, 16 bytes of arguments a batch: about what one call carries "
        "(8 bytes, and 8 for each number it passes), so its calls hardly travel together "
        "(a string is a size in bytes, a number a count of calls)",
        "for 16 calls a batch write the count, aggregate = 16 (no quotes); a size such as "
        "'64KiB' batches small calls by the hundred")


@pytest.mark.parametrize("aggregate", ["16", '"256"', '"64KiB"'])
def test_a_count_or_a_size_that_batches_is_not(tmp_path: Path, aggregate: str) -> None:
    assert _notes(tmp_path, aggregate) == []


@pytest.mark.parametrize("zero", ["0", '"0B"', '"0KiB"', '"0"'])
def test_a_count_or_size_of_zero_is_off_as_no_key_is(tmp_path: Path, zero: str) -> None:
    """A sweep's natural baseline, `--vary modules.client.use.f.aggregate=0,64`, was
    refused ("expected a number of calls from 1 ..., got 0"), and `aggregate = 1` is not
    off (every call goes as a batch of one): 0 is off now, and so is a size of 0
    (``"0KiB"`` was refused while ``0`` was off)."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("AGGREGATE", zero))
    cfg, errors = validate(str(path))
    assert errors == [] and cfg is not None
    use = cfg.modules["client"].use["f"]
    assert use.aggregate is None and use.aggregate_bytes is None
    path.write_text(TOML.replace(", aggregate = AGGREGATE", ""))
    plain, errors = validate(str(path))
    assert errors == [] and plain is not None and plain.modules["client"].use["f"] == use
