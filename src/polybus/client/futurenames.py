"""What a future has that a program ported from concurrent.futures, Dask or Ray reaches for.

A promise is used as its value: any attribute it does not have itself is its answer's,
looked up once the answer is here (client/promise.py). ``p.result(timeout=0.5)`` was
then the answer's ``result``: the program waited for the whole call and got
``AttributeError: 'float' object has no attribute 'result'``, and ``p.cancel()`` the
same. So a promise has these names itself, as it has ``done``, whatever its answer has
(an answer's own attribute of one of these names is ``polybus.wait(p).result``):

- ``result(timeout=None)``: the value, as ``polybus.wait(p, timeout=...)`` gives it: at
  most ``timeout`` seconds of waiting (then TimeoutError, the call going on), the
  call's error raised if it failed;
- ``exception(timeout=None)``: the call's error, or None if it answered; waits as
  ``result`` does;
- ``cancel()``: True if the call will never run (it had not started: waiting at the
  client, or queued at its replica, which says so), False if it has run, is running or
  is answered (then nothing changes): client/cancel.py. After a True, ``done`` and
  ``cancelled()`` are True and using the value raises `polybus.CancelledError`;
- ``cancelled()``: whether ``cancel()`` cancelled it;
- ``add_done_callback(fn)`` raises a UsageError at once, saying what to use: nothing
  calls a program back (``as_completed`` yields each promise as its answer comes);
- ``running()`` raises a UsageError at once too: the client does not know when a call
  starts on its replica (``done`` says whether the answer is here, ``cancel()`` whether
  the call had not started).

- ``await p`` raises a UsageError saying how to wait for it (Python's own words named
  the class ``CallPromise``), as does ``concurrent.futures.as_completed`` or ``wait``
  given promises (their lookup of a Future's ``_condition`` was the answer's:
  ``AttributeError: 'int' object has no attribute '_condition'``).

``done`` stays a property, as it was (``p.done``, never waits): a bool, as a test of it
(``is True``, JSON, a numpy mask) expects, so ``p.done()`` is Python's "'bool' object is
not callable".
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from polybus.errors import CancelledError, PolybusError, StalePromiseError, UsageError

__all__ = ["FutureNames"]


class FutureNames:
    """The names of a future a promise has itself (see the module's docstring)."""

    __slots__ = ()

    def result(self, timeout: float | None = None) -> Any:
        """The value, as ``polybus.wait(self, timeout=timeout)``: waits at most
        ``timeout`` seconds (TimeoutError, the call not cancelled; a later wait or use
        takes its answer); raises the call's error if it failed."""
        from polybus.client.promise import wait

        return wait(self, timeout=timeout)

    def exception(self, timeout: float | None = None) -> PolybusError | None:
        """The call's error, None if it answered; waits as `result` does (TimeoutError
        if ``timeout`` passes first). Cancelled, it raises CancelledError, as a
        concurrent.futures future does (a call that failed because a call it needed was
        cancelled was not cancelled itself: that error is its own, returned)."""
        try:
            self.result(timeout)
        except CancelledError as exc:
            if self.cancelled():
                raise
            return exc
        except TimeoutError as exc:
            if not isinstance(exc, PolybusError):  # (the wait's own; else the function's)
                raise
            return exc
        except StalePromiseError:  # (not the call's outcome: the promise's run ended)
            raise
        except PolybusError as exc:
            return exc
        return None

    def cancelled(self) -> bool:
        """Whether `cancel` cancelled the call (False for a kind of promise that is
        answered when made: client/done.py)."""
        return False

    def cancel(self) -> bool:
        """Cancel the call if it has not started (see the module's docstring); False for
        a kind of promise that is answered when made."""
        return False

    def __await__(self) -> Generator[Any, None, Any]:
        """Refused: a promise is not an asyncio future (its waits take no event loop)."""
        raise UsageError(
            "a polybus promise cannot be awaited (it is not an asyncio future): use it as "
            "its value, or polybus.wait(p), which blocks until it is answered; in a "
            "coroutine whose event loop must go on meanwhile, `await "
            "asyncio.to_thread(polybus.wait, p)`")

    @property
    def _condition(self) -> Any:
        """Refused: what concurrent.futures.wait and as_completed look up first."""
        raise UsageError(
            "a polybus promise is not a concurrent.futures Future: "
            "concurrent.futures.wait() and as_completed() cannot wait for it; use "
            "polybus.wait(promises, timeout=...) and polybus.as_completed(promises, "
            "timeout=...)")

    def running(self) -> bool:
        """Refused at once: the client is not told when a call starts on its replica."""
        raise UsageError(
            "a promise cannot tell whether its call is running: its replica does not say "
            "when a call starts; p.done says whether the answer is here (a property: it "
            "never waits), and p.cancel() cancels the call if it has not started (True) "
            "or says it has (False)")

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        """Refused at once: nothing calls a program back."""
        raise UsageError(
            "a promise takes no done callback: nothing calls a program back; take each "
            "promise as its answer comes with polybus.as_completed(promises), or look at "
            "p.done (a property: it never waits)")
