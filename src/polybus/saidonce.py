"""Each distinct warning once over many runs in one process (`polybus sweep`).

A sweep runs its program once per combination and repeat, and each run says its
warnings as `polybus run` does: the lines of the ``polybus.*`` loggers (a module's
replica count against a running registry, a replica lost) and the configuration's
notes (`ConfigWarning`). Twelve combinations run three times said the same warning 36
times. Within `said_once` the first of each kind is said, when it comes, as it would
have been; the later ones are counted, by run, for `Said.repeats` to say at the end.

A warning's kind is its text, unless its log record carries a ``KIND`` attribute
(``log.warning(..., extra={KIND: "..."})``), or its `ConfigWarning` does (set on the
instance given to ``warnings.warn``): for a warning that names what changes from one run
to the next though nothing else does (the replicas a run took in turn).
Warnings of the program itself (other categories than `ConfigWarning`) are left as
Python shows them.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO, TypeVar

from polybus.errors import ConfigWarning
from polybus.plural import plural

__all__ = ["KIND", "Said", "said_once"]

KIND = "said_as"
"""The log record attribute that names a warning's kind (see the module's docstring)."""

_SHOWN = 100  # characters of a repeated warning quoted at the end
_HEAD = 40  # ... of them its start, when what tells it from another comes later
_AROUND = 30  # ... and before the first that differs

R = TypeVar("R")


class Said:
    """The warnings said so far, by kind, and the runs that said each again."""

    def __init__(self) -> None:
        self.run = 0  # the run under way, from 1 (0: before the first)
        self._first: dict[str, str] = {}  # kind -> the text said
        self._again: dict[str, set[int]] = {}  # kind -> the later runs that said it
        self._other: dict[str, set[int]] = {}  # ... of them, those in other words
        self._lock = threading.Lock()

    def counting(self, runner: Callable[..., R]) -> Callable[..., R]:
        """``runner``, each call of it a new run."""
        def run(*args: object, **kwargs: object) -> R:
            with self._lock:
                self.run += 1
            return runner(*args, **kwargs)
        return run

    def first(self, kind: str, text: str) -> bool:
        """Whether ``text`` (of ``kind``) is to be said: the first of its kind."""
        with self._lock:
            if kind not in self._first:
                self._first[kind] = text
                return True
            self._again.setdefault(kind, set()).add(self.run)
            if text != self._first[kind]:
                self._other.setdefault(kind, set()).add(self.run)
            return False

    def repeats(self, who: str) -> list[str]:
        """A line per warning that came again, with how many runs said it again."""
        lines = []
        texts = [self._first[kind] for kind in self._again]
        for kind, runs in self._again.items():
            quoted = _quoted(self._first[kind], texts)
            other = len(self._other.get(kind, ()))
            others = f", {other} of them in other words" if other else ""
            lines.append(f"{who}: {plural(len(runs), 'more run')} said this warning again"
                         f"{others} (said once, above): {quoted}")
        return lines


def _quoted(text: str, texts: list[str]) -> str:
    """``text`` cut to about `_SHOWN` characters, keeping where it differs from the
    others of ``texts`` (two failures never looked at differ only in their last words:
    their first 100 characters alike told neither count apart)."""
    if len(text) <= _SHOWN:
        return text
    # (where it first differs from the one of the others that starts most like it)
    differs = max((next((i for i, (a, b) in enumerate(zip(text, o, strict=False))
                         if a != b), min(len(text), len(o)))
                   for o in texts if o != text), default=0)
    if differs < _SHOWN - _AROUND:
        return text[:_SHOWN - 3].rstrip() + "..."
    head = text[:_HEAD].rsplit(" ", 1)[0]  # (whole words: cut at a space)
    space = text.rfind(" ", _HEAD, differs - _AROUND)
    start = space + 1 if space != -1 else max(_HEAD, differs - _AROUND)
    tail = text[start:start + _SHOWN - _HEAD]
    return f"{head} ... {tail}" + ("..." if start + len(tail) < len(text) else "")


class _Once(logging.Handler):
    """On the ``polybus`` logger (which then does not propagate): a record said the
    first time goes on as it would have, to the root logger's handlers (none: Python's
    last resort, stderr); later ones of its kind are counted."""

    def __init__(self, said: Said) -> None:
        super().__init__()
        self.said = said

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if self.said.first(str(getattr(record, KIND, None) or text), text):
            logging.getLogger().handle(record)


@contextmanager
def said_once() -> Iterator[Said]:
    """Within: each distinct warning of polybus said once (see the module's docstring).
    Wrap the runner with `Said.counting` to count repeats by run."""
    said = Said()
    logger = logging.getLogger("polybus")
    handler = _Once(said)
    propagate = logger.propagate
    with warnings.catch_warnings():  # (the filters and showwarning restored after)
        # Every note of every run reaches showwarning, to be counted: Python's own once
        # per place holds only until the filters change, which a program's module
        # imported anew each run may do.
        warnings.simplefilter("always", ConfigWarning)
        show = warnings.showwarning

        def showwarning(message: Warning | str, category: type[Warning], filename: str,
                        lineno: int, file: TextIO | None = None,
                        line: str | None = None) -> None:
            if not issubclass(category, ConfigWarning) \
                    or said.first(str(getattr(message, KIND, None) or message),
                                  f"warning: {message}"):  # (as said)
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning
        logger.addHandler(handler)
        logger.propagate = False
        try:
            yield said
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate
