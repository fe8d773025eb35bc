"""Every configuration snippet docs/tuning.md shows is one the configuration accepts, so
the guide cannot drift from the keys (each snippet is placed in a small app and loaded)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polybus.config import load
from polybus.errors import ConfigError
from polybus.testing.apps import write_app

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"
# where a bare key of the guide belongs: the server module, f's define or f's use
SERVER_KEYS = {"transport", "replication", "spin", "coalesce", "pickle"}
DEFINE_KEYS = {"pool", "queue", "overflow", "priority", "cache", "cache_bytes"}
USE_KEYS = {"callstyle", "aggregate", "linger", "balance", "loadratio", "forward"}

SERVER = "def f(b=None, query='', rows=None, cols=None):\n    return 0\n"
CLIENT = "from polybus import use\n\nf = use('f')\n\ndef main():\n    return f(1)\n"


def snippets() -> list[str]:
    found = re.findall(r"`((?:define|use)\.f = \{[^`]*\}|[a-z_]+ = [^`]+)`", DOC.read_text())
    # (Python the guide shows, such as ``h = polybus.broadcast(table)``, is not configuration)
    return sorted({s.replace("pool = N", "pool = 8") for s in found if "polybus." not in s})


def app(tmp_path: Path, snippet: str) -> Path:
    server: list[str] = ['source = "server.py"', "replication = 2"]
    define = use = ""
    key = snippet.split(" = ", 1)[0]
    if key.startswith("define.f"):
        define = snippet.split(" = ", 1)[1]
    elif key.startswith("use.f"):
        use = snippet.split(" = ", 1)[1]
    elif key in SERVER_KEYS:
        server = [s for s in server if not s.startswith(key)] + [snippet]
    elif key in DEFINE_KEYS:
        define = "{ " + snippet + " }"
    elif key in USE_KEYS:
        use = '{ callstyle = "async", ' + snippet + " }"
    else:
        raise AssertionError(f"docs/tuning.md shows {snippet!r}: add where {key!r} goes")
    lines = ["[modules.server]", *server]
    if define:
        lines.append(f"define.f = {define}")
    lines += ["", "[modules.client]", 'source = "client.py"', 'entrypoint = "main"']
    if use:
        lines.append(f"use.f = {use}")
    lines += ["", "[bind]", '"client.f" = "server.f"', ""]
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml="\n".join(lines))


def test_the_guide_shows_snippets() -> None:
    assert len(snippets()) >= 10


@pytest.mark.parametrize("snippet", snippets())
def test_snippet_is_accepted(tmp_path: Path, snippet: str) -> None:
    load(app(tmp_path, snippet))


def test_a_mistaken_snippet_is_refused(tmp_path: Path) -> None:
    """The check above can fail: a misspelt key in the same place is an error."""
    with pytest.raises(ConfigError, match="cach"):
        load(app(tmp_path, 'define.f = { cach = ["b"] }'))
