"""Workers of a program's module ``server`` started by hand once (a registry and a
worker per replica: polybus.testing.hosts.by_hand), for the runs of several tests whose
``server`` is the same (its file, and its ``[modules.server]`` table) to use, as runs
at a shared registry use workers something else started: each such run starts none
of its own, which was most of its time. What differs between those tests is the
client's side alone (a call style, what the program sends).

`SharedWorkers.run(app)` is ``polybus.run(app)`` at the registry of the workers that
serve ``app``'s ``server`` (started at the first run that needs them); `close` ends
every one of them, however the tests went (SIGTERM, then SIGKILL: by_hand).
"""

from __future__ import annotations

import json
import tomllib
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import polybus
from polybus.runner import RunResult
from polybus.testing.hosts import by_hand

__all__ = ["SharedWorkers"]


class SharedWorkers:
    def __init__(self) -> None:
        self._stack = ExitStack()
        self._started: dict[str, list[str]] = {}  # server's file and table -> its use
        self.said: list[str] = []  # what the workers printed, once ended

    def run(self, app: Path, **kw: Any) -> RunResult:
        """``polybus.run(app, **kw)`` at the registry of workers serving ``app``'s
        module ``server`` as ``app`` configures it."""
        table = tomllib.loads(app.read_text())["modules"]["server"]
        source = (app.parent / table["source"]).read_text()
        key = json.dumps([source, table], sort_keys=True)
        if key not in self._started:
            self._started[key] = self._stack.enter_context(
                by_hand(app, int(table.get("replication", 1)), self.said))
        use = self._started[key]  # ["--registry", address, "--token-file", path]
        return polybus.run(app, registry=use[1], token_file=use[3], **kw)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> SharedWorkers:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
