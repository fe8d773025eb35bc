"""Progress of a benchmark run: a tiny protocol, a silent one, and a rich one.

A benchmark calls ``progress.begin(total, what)`` once it knows how many steps it has,
then ``progress.advance(what)`` after each. Tests pass :class:`NullProgress`.

`Times` is the bar's column of times, "elapsed 0:00:02, left 0:00:01", here and on
``polybus sweep``'s bar: the time left is rich's estimate from the steps so far.

A count that was short (a step advanced past the total) does not make the bar say
``9/8 ... left 0:00:00`` while work goes on: the total grows with the steps, and the
time left is shown as not known (``-:--:--``) for the rest of that count.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.progress import Progress as _RichBar
from rich.text import Text

__all__ = ["NullProgress", "Progress", "RichProgress", "Times", "times"]


def times(elapsed: float | None, left: float | None) -> str:
    """``elapsed 0:00:02, left 0:00:01``: the bar read ``0:00:02 left 0:00:01``, the
    first time unnamed. ``-:--:--`` for a time not known yet."""
    def hms(s: float | None, up: bool) -> str:  # (elapsed rounded down, left up)
        if s is None:
            return "-:--:--"
        return str(datetime.timedelta(seconds=max(0, math.ceil(s) if up else int(s))))
    return f"elapsed {hms(elapsed, False)}, left {hms(left, True)}"


class Times(ProgressColumn):
    """A bar's times, named (`times`)."""

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        # (past its count, rich's estimate is of steps that are not the ones left)
        left = None if task.fields.get(OVERRUN) else task.time_remaining
        return Text(times(elapsed, left), style="progress.elapsed")


#: a task field: the bar's count was advanced past its total (`RichProgress.advance`)
OVERRUN = "overrun"


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
    """A rich progress bar on ``console`` (stderr by default), with the time elapsed and
    the time left (`Times`); use as a context manager. ``get_time``: the bar's clock
    (tests give one of their own)."""

    def __init__(self, console: Console | None = None,
                 get_time: Callable[[], float] | None = None) -> None:
        self._bar = _RichBar(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), Times(),
                             console=console or Console(stderr=True), transient=True,
                             get_time=get_time)
        self._task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._bar.stop()

    def begin(self, total: int, description: str) -> None:
        if self._task is None:
            self._task = self._bar.add_task(description, total=total, **{OVERRUN: False})
        else:
            self._bar.reset(self._task, total=total, description=description,
                            **{OVERRUN: False})

    def advance(self, description: str) -> None:
        """One step done. Past the total (a count that was short), the total grows to one
        more than the steps done, and the time left is not known (`Times`)."""
        if self._task is None:
            return
        task = self._find(self._task)
        if task.fields.get(OVERRUN) or (task.total is not None
                                         and task.completed >= task.total):
            self._bar.update(self._task, advance=1, description=description,
                             total=task.completed + 2, **{OVERRUN: True})
        else:
            self._bar.update(self._task, advance=1, description=description)

    def _find(self, task_id: TaskID) -> Task:
        return next(t for t in self._bar.tasks if t.id == task_id)
