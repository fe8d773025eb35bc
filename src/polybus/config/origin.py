"""Where overrides came from, and so what a mistake in one is labelled and how a hint
writes the fix.

The same ``KEY=VALUE`` reaches the configuration from the command line (``--set``,
typed in a shell) or from Python (``polybus.run(path, overrides=...)``); a mistake in it
is reported against the one the user wrote, and only a shell user is told about shell
quoting.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["PYTHON", "SET", "VARY", "Origin", "written_by"]


def written_by(overridden: Iterable[str], key: str | None) -> bool:
    """Whether an override wrote ``key``: one of the dotted keys ``overridden`` is it, or
    a table above it."""
    return key is not None and any(key == o or key.startswith(o + ".") for o in overridden)


@dataclass(frozen=True)
class Origin:
    """The overrides' source: ``label`` leads an error line (as a file name would)."""

    label: str
    shell: bool  # typed in a shell: a hint shows the option and the shell's quoting

    def example(self, key: str, value: str) -> str:
        """``key`` set to ``value`` as the user writes it here: ``--set 'key=value'``
        (quoted when the shell needs it) or ``{"key": value}``. ``value`` is TOML that
        reads the same in Python (``8``, ``"0"``, ``{}``)."""
        if self.shell:
            return f"{self.label} {shlex.quote(f'{key}={value}')}"
        return f"{{{json.dumps(key)}: {value}}}"

    def string_hint(self, key: str, text: str) -> str:
        """How to give ``key`` the string ``text`` (a value that read as a number)."""
        quoted = json.dumps(text)  # (a TOML basic string too)
        if self.shell:
            return "quote it for TOML inside the shell's quotes: " + self.example(key, quoted)
        return "pass it as a str: " + self.example(key, quoted)

    def add_hint(self, key: str, value: str) -> str:
        """How to add an override of ``key`` to ``value``."""
        return f"add {self.example(key, value)}" + ("" if self.shell else " to the overrides")


SET = Origin("--set", shell=True)          # polybus run / check / serve / worker / sweep
VARY = Origin("--vary", shell=True)        # polybus sweep: a varied key (sweep.py blames it)
PYTHON = Origin("overrides", shell=False)  # polybus.run(path, overrides=...), serve(...)
