"""The client's count of live arrays per operand key (client/naming.py) when an array
is freed in another thread while the program names one of the same content: each is
counted once, so a key whose arrays are all gone leaves the count and is reported dead
(to be dropped on the replicas), and one with an array alive stays."""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import pytest

from polybus.client import naming
from polybus.client.naming import Known, content_key


class _Interleaved(dict[str, int]):
    """The count, where the main thread's first read of ``key`` lets ``meanwhile`` run
    (in another thread, to its end) before the read returns: a thread switch at the
    worst moment, made certain."""

    def __init__(self, key: str, meanwhile: Any) -> None:
        super().__init__()
        self.key = key
        self.meanwhile = meanwhile

    def get(self, key: str, default: Any = None) -> Any:
        got = super().get(key, default)
        if key == self.key and self.meanwhile and threading.current_thread() is threading.main_thread():
            run, self.meanwhile = self.meanwhile, None
            t = threading.Thread(target=run)
            t.start()
            t.join()
        return got


def _settled() -> None:
    gc.collect()
    with naming._lock:
        naming._settle()


def test_an_array_freed_in_another_thread_meanwhile_is_counted_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    key = content_key(np.arange(64.0))
    _settled()
    known = Known()  # (after the first array's death was reported)
    holder = [np.arange(64.0)]
    live = _Interleaved(key, None)
    monkeypatch.setattr(naming, "_live", live)
    assert content_key(holder[0]) == key
    assert live.get(key) == 1
    live.meanwhile = holder.clear  # the other thread frees that array mid-count
    a = np.arange(64.0)
    assert content_key(a) == key
    assert not holder
    _settled()
    assert live.get(key) == 1  # a alone
    assert key not in known.dead  # an array of it is alive
    del a
    _settled()
    assert key not in live  # every array of it freed
    assert known.dead == [key]  # and reported once
