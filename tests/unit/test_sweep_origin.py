"""A warning a run says about a varied key named it as `--set`'s (`warning: --set:
modules.server.replication: module 'server' ... keeps state`), though the user typed
`--vary`: the sweep gave every run its values with the origin of --set. With no --set
given, every override a run has is a --vary's, and is said so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polybus.config.origin import SET, VARY


class _Ran:
    elapsed_s, bytes_sent, bytes_received, result = 1.0, 0, 0, 1
    replicas = ()  # (RunResult's: the replicas each module's run found)


@pytest.mark.parametrize(("extra", "origin"), [([], VARY),
                                               (["--set", "modules.client.args=[1]"], SET)])
def test_a_runs_overrides_are_labelled_by_the_option_that_gave_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str],
        origin: object) -> None:
    import polybus.runner
    from polybus.cli.main import main

    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text('from polybus import use\n\nf = use("f")\n\n\n'
                                   "def main(x=1):\n    return f(x)\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "s.py"\n\n[modules.client]\nsource = "c.py"\n'
        'entrypoint = "main"\n\n[bind]\n"client.f" = "server.f"\n')
    seen: list[Any] = []

    def run(path: str, sets: tuple[str, ...], **kw: Any) -> _Ran:
        seen.append(kw["origin"])
        return _Ran()

    monkeypatch.setattr(polybus.runner, "run", run)
    assert main(["sweep", str(tmp_path / "app.toml"), "--quiet", "--repeat", "1",
                 "--vary", "modules.server.replication=1,2", *extra]) == 0
    assert seen == [origin, origin]
