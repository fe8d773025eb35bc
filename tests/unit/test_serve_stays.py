"""Which of serve's 502s say a lost replica is not started again (http/frontdoor.py
`_stays`): only where the engine that started it can say how it ended and nothing
starts it again; a registry's workers (others started them) are always "retry later"."""

from __future__ import annotations

from pathlib import Path

from polybus.config import load
from polybus.engines.base import Cluster
from polybus.http.frontdoor import _stays

TOML = """\
[modules.web]
source = "web.py"

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /" = "web.page"
"""


def _how(name: str) -> str | None:
    return None


def test_why_an_ended_worker_stays_ended(tmp_path: Path) -> None:
    (tmp_path / "web.py").write_text("def page():\n    return 'hi'\n")
    (tmp_path / "app.toml").write_text(TOML)
    app = load(tmp_path / "app.toml", ("serve.restart=false",))
    engine = Cluster("127.0.0.1:1", b"t" * 32, how_ended=_how)
    assert _stays(app, engine) == "[serve] restart = false"
    assert _stays(app, Cluster("127.0.0.1:1", b"t" * 32)) is None  # (--registry)
    restarting = Cluster("127.0.0.1:1", b"t" * 32, halt_restarts=lambda: None,
                         how_ended=_how)
    assert _stays(load(tmp_path / "app.toml"), restarting) is None
    ray = load(tmp_path / "app.toml", ('cluster.engine="ray"',))
    assert _stays(ray, engine) == "the ray engine starts none again"  # (no supervisor)
    # (Ray says how an actor ended only when asked, a moment later: client/lossline.py)
    later = Cluster("127.0.0.1:1", b"t" * 32, how_ended_later=_how)
    assert _stays(ray, later) == "the ray engine starts none again"
