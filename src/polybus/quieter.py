"""The same warning again and again, said once a minute with the count of the rest.

A worker left running with an old token retries its registry every few seconds, and
each refusal was logged: 36 lines in 26 seconds for two such workers, burying what else
the registry said. `Quieter` lets the first of a kind through, then at most one a
``window``, which says how many were held back meanwhile; what is still held back when
the process stops is said then (`rest`). Kinds are told apart by their text with port
numbers blanked (each retry comes from a new port), and so are the bytes a peer sent,
quoted as `repr` quotes bytes (`b'GET / HT'`): strangers sending bytes of their own
are one kind, not a line each.
"""

from __future__ import annotations

import re
import threading
import time

__all__ = ["Quieter", "doubling"]

_PORT = re.compile(r":\d+")
_BYTES = re.compile(r"\bb'(?:[^'\\]|\\.)*'" + r'|\bb"(?:[^"\\]|\\.)*"')


class Quieter:
    def __init__(self, window: float = 60.0) -> None:
        self.window = window
        # kind -> (said at, held back since, the text last held back)
        self._last: dict[str, tuple[float, int, str]] = {}
        self._forgotten = 0  # held back, of kinds forgotten to bound the memory (rest says)
        self._lock = threading.Lock()

    def let(self, text: str) -> str | None:
        """``text`` to log now (with what was held back), or None to hold it back."""
        kind = _PORT.sub(":*", _BYTES.sub("b'*'", text))
        now = time.monotonic()
        with self._lock:
            said, held, _ = self._last.get(kind, (-self.window, 0, ""))
            if now - said < self.window:
                self._last[kind] = (said, held + 1, text)
                return None
            if len(self._last) > 1000:  # (bounded: kinds long quiet go, their counts kept)
                self._forgotten += sum(h for k, (t, h, _) in self._last.items()
                                       if now - t >= self.window and k != kind)
                self._last = {k: v for k, v in self._last.items() if now - v[0] < self.window}
            self._last[kind] = (now, 0, "")
        return text if not held else f"{text} (and {held} more like it since the last said)"

    def rest(self) -> list[str]:
        """What was held back and not yet said, a line per kind (the last of each, with
        the count), and forget it: for the process to log as it stops."""
        with self._lock:
            lines = [f"{held} more like this since the last said, the last: {last}"
                     for _, held, last in self._last.values() if held]
            if self._forgotten:
                lines.append(f"{self._forgotten} more held back, of kinds since forgotten "
                             "(to bound memory)")
            self._last = {k: (said, 0, "") for k, (said, _, _) in self._last.items()}
            self._forgotten = 0
        return lines


def doubling(n: int) -> bool:
    """Whether the ``n``-th of a repeated event (from 1) is said: the 1st, 2nd, 4th,
    8th..., so a flood is said in a few lines that still show it grow."""
    return n & (n - 1) == 0
