"""Writing a small polybus program to disk, for tests of a configuration or a run.

``write_app(where, server=..., client=..., toml=...)`` writes ``server.py``,
``client.py`` and ``app.toml`` (each dedented, so they can be indented in a test) and
returns the configuration's path, ready for ``polybus.run`` or ``polybus.config.load``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["write_app"]


def write_app(where: Path, *, server: str, client: str, toml: str) -> Path:
    """Write server.py, client.py and app.toml (dedented) into ``where``; the toml path."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "server.py").write_text(textwrap.dedent(server))
    (where / "client.py").write_text(textwrap.dedent(client))
    app = where / "app.toml"
    app.write_text(textwrap.dedent(toml))
    return app
