"""A function passed as an argument (a Ray or Dask user's habit: ``score(t, above)``)
is told what to send instead. A function of the program's own modules never unpickles
on the other side (each is imported under a name of its own there, or not at all): a
new user's ``above`` of the client module was told "convert it, or set pickle = true",
then, with pickle on, failed on every replica with "No module named
'polybus_user_client'; a pickled class must come from ...". It is now refused at the
client, pickle or not, with what to do (wire/unencodable.py)."""

from __future__ import annotations

import math
import sys
import types
from typing import Any

import pytest

from polybus.usernames import import_name
from polybus.wire.codec import Codec
from polybus.wire.messages import Result

ADVICE = ("define it in the served module and pass what chooses it (its name, or its "
          "parameters)")


def _refused(value: Any, allow_pickle: bool = False) -> str:
    with pytest.raises(TypeError) as e:
        Codec(allow_pickle=allow_pickle).encode(Result(1, value))
    return str(e.value)


def _program_module(monkeypatch: pytest.MonkeyPatch, code: str) -> Any:
    """The client module with ``code``, imported as a run imports it (so pickle would
    take its functions by name here)."""
    module = types.ModuleType(import_name("client"))
    exec(code, module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


@pytest.mark.parametrize("allow_pickle", [False, True])
def test_a_function_of_the_programs_module_is_refused_with_what_to_send(
        monkeypatch: pytest.MonkeyPatch, allow_pickle: bool) -> None:
    above = _program_module(monkeypatch, "def above(x):\n    return x > 0.2\n").above
    said = _refused(above, allow_pickle)
    assert said == ("a function of module 'client' (above) cannot be sent: a replica runs "
                    "only its own module's functions, and cannot import the program's "
                    f"modules; {ADVICE}"), said
    assert "pickle = true" not in said


def test_a_class_of_the_programs_module_is_refused_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module = _program_module(monkeypatch, "class Rule:\n    pass\n")
    said = _refused([1, module.Rule], allow_pickle=True)
    assert said.startswith("a class of module 'client' (Rule) cannot be sent: "), said


def test_a_lambda_is_told_to_pass_what_chooses_the_function() -> None:
    said = _refused(lambda x: x)
    assert said == f"a lambda or a function defined inside another cannot be sent: {ADVICE}"


def test_a_function_of_an_installed_module_still_pickles() -> None:
    assert "set pickle = true" in _refused(math.sqrt)  # (the safe codec: pickle would)
    Codec(allow_pickle=True).encode(Result(1, math.sqrt))


def test_a_replica_returning_a_function_of_its_own_module_is_told_what_to_return(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica's answer that is a function of the module it serves (pickle = true):
    the client cannot import that module either. It was told to "define it in the
    served module", where it was already defined."""
    from polybus.client.stubs import importing, serving

    module = types.ModuleType(import_name("server"))
    exec("def double(x):\n    return 2 * x\n", module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    serving("server")  # (as a worker of module 'server' is)
    try:
        said = _refused(module.double, allow_pickle=True)
    finally:
        importing(None)
    assert said == ("a function of module 'server' (double) cannot be sent: the client "
                    "cannot import module 'server', which defines it; return what chooses "
                    "it (its name, or its parameters) and look it up where it is used"), said


def test_an_instance_of_a_class_of_the_programs_module_is_not_told_to_set_pickle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An object of a class the client module defines: with pickle on it failed on the
    replica ("No module named 'polybus_user_client'"), so the safe codec's refusal no
    longer sends the user there; it says what to send (a class defined inside a
    function, which pickle refuses too, likewise)."""
    module = _program_module(monkeypatch, "class Thing:\n    pass\n")
    said = _refused({"k": module.Thing()})
    assert said.startswith("a value of type Thing, a class of module 'client', cannot be "
                           "sent by the safe codec"), said
    assert "set pickle = true on the serving module" not in said
    assert "a module of its own that both sides import" in said

    def make() -> Any:
        class Local:
            pass
        return Local()

    said = _refused(make())
    assert "a class defined inside a function" in said, said
    assert "set pickle = true on the serving module" not in said


def test_an_instance_of_an_importable_class_keeps_the_pickle_hint() -> None:
    import fractions
    said = _refused(fractions.Fraction(1, 3))
    assert said.endswith("convert it, or set pickle = true on the serving module in the "
                         "configuration"), said


def test_a_replica_returning_an_instance_of_its_own_modules_class_names_the_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica's answer ``Box(1)``, of a class the module it serves defines: the
    client cannot import that class (it lives in the served module). It was told "no
    replica can import that class", the wrong side, and to "send" its fields."""
    from polybus.client.stubs import importing, serving

    module = types.ModuleType(import_name("server"))
    exec("class Box:\n    def __init__(self, v):\n        self.v = v\n", module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    serving("server")  # (as a worker of module 'server' is)
    try:
        said = _refused(module.Box(1))
    finally:
        importing(None)
    assert said.startswith("a value of type Box, a class of module 'server', cannot be "
                           "sent by the safe codec"), said
    assert "no replica can import" not in said, said
    assert ("pickle = true would not carry it either: the client (or a replica of "
            "another module it is sent on to) cannot import module 'server', which "
            "defines that class; return its fields") in said, said


def test_a_client_sending_an_instance_of_its_own_class_names_the_replicas(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module = _program_module(monkeypatch, "class Thing:\n    pass\n")
    said = _refused(module.Thing())
    assert ("pickle = true would not carry it either: no replica can import module "
            "'client', which defines that class; send its fields") in said, said
