"""Which failures `callsite.place` names the user's line in: a call lost with every
replica and one nobody serves, as a remote error is (a new user's lost call said
"every replica of crash is gone" and nothing of which call or where)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, cast

import pytest

from polybus.callsite import PLACED, place
from polybus.config.model import AppConfig
from polybus.errors import ConfigError, ConnectionLostError, NoReplicaError, PolybusError


def _raise(exc: PolybusError) -> None:
    raise exc  # (this file is the user's code here: not polybus's)


@pytest.mark.parametrize("exc", [ConnectionLostError("every replica of f is gone"),
                                 NoReplicaError("no live replica serves f")])
def test_a_lost_or_unserved_call_names_the_users_line(exc: PolybusError) -> None:
    assert isinstance(exc, PLACED)
    line = _raise.__code__.co_firstlineno + 1
    said = str(exc)
    with pytest.raises(type(exc)) as info:
        _raise(exc)
    place(cast(Any, info.value), cast(AppConfig, None), "client")
    assert info.value.call_site == f"{__file__}:{line}"  # type: ignore[attr-defined]
    head, at, code = str(info.value).split("\n")
    assert head == said
    assert at == f'  the call whose answer was used at File "{__file__}", line {line}, in _raise:'
    assert code.strip() == "raise exc  # (this file is the user's code here: not polybus's)"


def test_a_configuration_error_is_not_placed() -> None:
    assert not isinstance(ConfigError("x"), PLACED)


def _used_in_a_library(exc: PolybusError) -> None:
    future: Future[None] = Future()
    future.set_exception(exc)
    future.result()  # (the standard library raises it: as numpy's mean of promises did)


def test_the_users_line_is_named_not_the_librarys_that_used_the_promise() -> None:
    # (a new user's np.mean(pis) of promises, one of which failed, was placed "at File
    # .../numpy/_core/_methods.py, line 116, in _mean: arr = asanyarray(a)")
    exc = NoReplicaError("no live replica serves f")
    line = _used_in_a_library.__code__.co_firstlineno + 3
    with pytest.raises(NoReplicaError) as info:
        _used_in_a_library(exc)
    place(cast(Any, info.value), cast(AppConfig, None), "client")
    assert info.value.call_site == f"{__file__}:{line}"  # type: ignore[attr-defined]
    at = str(info.value).split("\n")[1]
    assert at == (f'  the call whose answer was used at File "{__file__}", line {line}, '
                  "in _used_in_a_library:")


def test_a_package_installed_for_the_user_or_by_the_system_is_a_librarys() -> None:
    """numpy installed with ``pip install --user`` (or a distribution's package, in
    a site-packages of `site`'s own) was taken for the program's own code: the call
    site named numpy's line, not the program's that handed it the promises."""
    import os
    import site

    from polybus.ownfiles import is_library_file

    homes = [site.getusersitepackages(), *site.getsitepackages()]
    for home in homes:
        assert is_library_file(os.path.join(home, "numpy", "_core", "_methods.py")), home
    assert not is_library_file(__file__)  # (the program's own: this test's)
