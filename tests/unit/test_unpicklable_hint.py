"""A value pickle cannot carry either is not told "or set pickle = true" (a new-user
trial set it for a generator, then got "cannot pickle 'generator' object"): it is told
what to send instead (wire/unencodable.py, `unpicklable`)."""

from __future__ import annotations

import io
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polybus.wire.codec import Codec
from polybus.wire.messages import Result


def _gen() -> Iterator[int]:
    yield 1


def _refused(value: Any, allow_pickle: bool = False) -> str:
    with pytest.raises(TypeError) as e:
        Codec(allow_pickle=allow_pickle).encode(Result(1, value))
    return str(e.value)


def _cases(tmp_path: Path) -> list[tuple[Callable[[], Any], str]]:
    return [
        (_gen, "a generator cannot be sent: pass list(...) of it"),
        (lambda: (x for x in range(0)), "a generator cannot be sent: pass list(...) of it"),
        (lambda: open(tmp_path / "f", "wb"),
         "an open file cannot be sent: pass its path, or its bytes"),
        (lambda: lambda: 0, "a lambda or a function defined inside another cannot be "
                            "sent: define it in the served module and pass what chooses "
                            "it (its name, or its parameters)"),
        (lambda: sys, "a module cannot be sent: import it in the served module"),
        (threading.Lock, "a value of type lock cannot be sent at all (pickle cannot "
                         "carry it either); make it on the replica"),
    ]


def test_a_value_pickle_cannot_carry_is_told_what_to_send_instead(tmp_path: Path) -> None:
    for make, said in _cases(tmp_path):
        value = make()
        try:
            assert _refused(value) == said
            pickled = _refused(value, allow_pickle=True)  # (pickle's error, then what to do)
            assert pickled.startswith(f"a value of type {type(value).__qualname__} cannot "
                                      "be pickled: ")
            assert pickled.endswith("; " + said.rpartition(": " if ": " in said else "; ")[2])
        finally:
            if isinstance(value, io.IOBase):
                value.close()


def test_a_socket_is_told_to_be_made_on_the_replica() -> None:
    with socket.socket() as s:
        said = _refused(s)
    assert said.endswith("cannot be sent at all (pickle cannot carry it either); make it "
                         "on the replica") and "pickle = true" not in said


def test_a_value_pickle_can_carry_keeps_the_hint() -> None:
    assert _refused(object()).endswith("convert it, or set pickle = true on the serving "
                                       "module in the configuration")
    assert _refused(io.BytesIO(b"x")).endswith("set pickle = true on the serving module "
                                               "in the configuration")


def test_a_lock_inside_a_list_is_told_to_be_made_on_the_replica() -> None:
    said = _refused([1, threading.Lock()])
    assert "cannot be sent at all (pickle cannot carry it either); make it on the " \
           "replica" in said and "pickle = true" not in said, said


def test_a_refused_value_is_not_pickled_to_choose_the_hint() -> None:
    # (pickling it would copy it whole and run its own __reduce__ on the error path)
    ran: list[str] = []

    class Loud:
        def __reduce__(self) -> Any:
            ran.append("reduce")
            return (Loud, ())

    assert _refused(Loud()).endswith("convert it, or set pickle = true on the serving "
                                     "module in the configuration")
    assert ran == []


def test_a_replicas_answer_is_told_what_to_return_instead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (from a new-user trial: a served function that returned a lock was told "make it
    # on the replica", where it was made, and one that returned a generator "pass
    # list(...) of it", though it passed nothing)
    from polybus.client import stubs

    monkeypatch.setattr(stubs, "_phase", [("replica", "server", "")])
    with open(tmp_path / "f", "wb") as f:
        said = {
            "a generator cannot be sent: return list(...) of it": _gen(),
            "an open file cannot be sent: return its path, or its bytes": f,
            "a module cannot be sent: import it where it is used": sys,
            "a lambda or a function defined inside another cannot be sent: return what "
            "chooses it (its name, or its parameters) and look it up where it is used":
                lambda: 0,
            "a value of type lock cannot be sent at all (pickle cannot carry it either); "
            "make it where it is used, not on the replica": threading.Lock(),
        }
        for text, value in said.items():
            assert _refused(value) == text
            assert _refused(value, allow_pickle=True).endswith("; " + text.rpartition(
                ": " if ": " in text else "; ")[2])
