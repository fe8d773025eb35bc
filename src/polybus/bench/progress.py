"""Progress of a benchmark run: a tiny protocol, a silent one, and a rich one.

A benchmark calls ``progress.begin(total, what)`` once it knows how many steps it has,
then ``progress.advance(what)`` after each. Tests pass :class:`NullProgress`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as _RichBar

__all__ = ["NullProgress", "Progress", "RichProgress"]


class Progress(Protocol):
    def begin(self, total: int, description: str) -> None: ...

    def advance(self, description: str) -> None: ...


class NullProgress:
    """Reports nothing."""

    def begin(self, total: int, description: str) -> None:
        pass

    def advance(self, description: str) -> None:
        pass


class RichProgress:
    """A rich progress bar on ``console`` (stderr by default); use as a context manager."""

    def __init__(self, console: Console | None = None) -> None:
        self._bar = _RichBar(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TextColumn("elapsed"),
                             TimeElapsedColumn(),
                             console=console or Console(stderr=True), transient=True)
        self._task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._bar.stop()

    def begin(self, total: int, description: str) -> None:
        if self._task is None:
            self._task = self._bar.add_task(description, total=total)
        else:
            self._bar.reset(self._task, total=total, description=description)

    def advance(self, description: str) -> None:
        if self._task is not None:
            self._bar.update(self._task, advance=1, description=description)
