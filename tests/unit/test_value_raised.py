"""wire/undecodable.py value_raised: what a value's own pickling code raised fails that
value alone, except, in the main thread, what is not an Exception: a Ctrl-C, and a
program's own signal handler's sys.exit() (it was turned into a failed value and the
process went on)."""

from __future__ import annotations

import threading

from polybus.wire.undecodable import value_raised


class Odd(BaseException):
    pass


def test_in_the_main_thread_only_an_exception_fails_the_value() -> None:
    assert value_raised(ValueError("x"))
    assert not value_raised(SystemExit(3))
    assert not value_raised(KeyboardInterrupt())
    assert not value_raised(Odd())


def test_in_another_thread_anything_fails_the_value_alone() -> None:
    got: list[bool] = []

    def look() -> None:
        got.extend(value_raised(e) for e in (ValueError(), SystemExit(3),
                                             KeyboardInterrupt(), Odd()))

    t = threading.Thread(target=look)
    t.start()
    t.join(10)
    assert got == [True, True, True, True]
