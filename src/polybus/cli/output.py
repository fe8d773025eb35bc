"""The console the CLI prints its result tables to (``polybus bench``, ``polybus sweep``).

On a terminal, the terminal's width. Piped or redirected (``| cat``, ``> file``), rich
falls back to 80 columns and a wider table had its cells and headers cut to "…"; there
the width is unbounded instead, so a table takes its natural width and nothing is lost.
"""

from __future__ import annotations

import os
import select
import sys
from typing import IO

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

__all__ = ["STDOUT_GONE", "UNBOUNDED", "is_tty", "result_console", "rule", "stdout_gone"]

UNBOUNDED = 1_000_000
"""Columns of a console that is not a terminal: more than any table here takes."""
_RULE_WIDTH = 80


def is_tty(file: IO[str] | None = None) -> bool:
    """Whether ``file`` (standard output by default) is a terminal."""
    stream = file if file is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def result_console(file: IO[str] | None = None) -> Console:
    """A console on ``file`` (standard output by default): the terminal's width, or
    unbounded when it is not a terminal."""
    return Console(file=file, width=None if is_tty(file) else UNBOUNDED)


def rule(console: Console, title: str | Text) -> None:
    """A horizontal rule with ``title`` (a str is read as markup; a Text, as it is):
    across a terminal, 80 columns elsewhere (an unbounded console would draw it a
    million columns long)."""
    console.print(Rule(title), width=None if console.width < UNBOUNDED else _RULE_WIDTH)


STDOUT_GONE = "standard output was closed (its reader ended, as `head` does)"


def stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (``polybus ... | head``,
    head ended first); if so, what is still to be written there goes to /dev/null from
    now on (the interpreter's last flush said "Exception ignored ... BrokenPipeError").
    A BrokenPipeError of anything else (a socket) is not taken for it."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False
    if gone:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return gone
