"""Which arguments of a binding's calls its Comm caches, and how a held call keeps them.

``define.<iface>.cache`` names parameters (positions of named positional ones, keywords
by name, every extra positional for a ``*args`` parameter, every other keyword for a
``**kwargs`` one) or is ``"auto"``: any array or bytes of AUTO_THRESHOLD or more. An
argument it caches is named by its content (client/naming.py) when the Comm makes a
call's messages (client/operands.py, which inherits `CachedArgs`); one it names but
cannot name (a list, say) is said once, and goes by value. A call held to be written
later keeps its cached arguments as they are now (`held`, snapshot.py): an array that
could change is copied once per content, read-only, the copy shared by every held call
that names it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from polybus.client.naming import content_key
from polybus.client.shared import Shared, copy_of, large
from polybus.client.snapshot import Keep, frozen, kept
from polybus.wire.codec import OutOfBand

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord
    from polybus.client.dispatch import Dispatcher

__all__ = ["CachedArgs"]

log = logging.getLogger("polybus.client")
# What `cache` names but cannot name (said once per interface and argument): the
# containers a program passes where it could pass an array
_NOT_CACHED = frozenset({list, tuple, dict, set, str})
_said_not_cached: set[tuple[str, int | str]] = set()


class CachedArgs:
    """`Comm`'s cached arguments (a mixin: the plan below is set by Comm.__init__)."""

    dispatcher: Dispatcher
    positions: frozenset[int]
    names: frozenset[str]
    rest_from: int | None
    other_names: frozenset[str] | None
    auto: bool

    def _named(self, index: int | str) -> bool:
        """Whether the configuration caches the argument at ``index`` (a position or a
        keyword)."""
        if isinstance(index, int):
            return index in self.positions or (
                self.rest_from is not None and index >= self.rest_from)
        return index in self.names or (
            self.other_names is not None and index not in self.other_names)

    def _operand(self, index: int | str, value: Any) -> tuple[str, Any] | None:
        if type(value) is Shared:
            return value.key, value.value
        if self._named(index) or (self.auto and large(value)):
            # Large bytes come marked to travel out of band (wireargs.py): named by their
            # bytes, and Put (or sent by value after two misses) as marked.
            key = content_key(value.data if type(value) is OutOfBand else value)
            if key is None and type(value) in _NOT_CACHED and (
                    index in self.positions if isinstance(index, int) else index in self.names):
                self._not_cached(index, value)  # (named: not any extra of a *args, **kwargs)
            return (key, value) if key is not None else None
        return None

    def _not_cached(self, index: int | str, value: Any) -> None:
        """Said once per argument: ``cache`` names it, and it was given a list (say),
        which only an array or bytes can be (it went with every call, silently)."""
        where = (self.dispatcher.interface, index)
        if where in _said_not_cached:
            return
        _said_not_cached.add(where)
        what = f"argument {index + 1}" if isinstance(index, int) else f"argument {index!r}"
        log.warning("polybus: warning: %s(...) %s is cached (define.%s.cache), but a %s is "
                    "not: only an array or bytes is named and kept on the replicas, so it "
                    "goes with every call; pass numpy.asarray(...) to cache it",
                    self.dispatcher.interface, what, self.dispatcher.interface,
                    type(value).__name__)

    def held(self, index: int | str, value: Any) -> Any:
        """A held call's argument at ``index`` if this binding caches it, as it is now
        (snapshot.py): an array that could change is copied once per content, read-only,
        and the copy shared by every held call naming that content (64 calls sharing a
        writable B hold one copy, not 64); None for an argument it does not cache. A
        bytearray is kept as bytes (what the replica gets for one anyway)."""
        if type(value) is bytearray:
            return bytes(value) if self._named(index) or (self.auto and large(value)) else None
        if type(value) is not np.ndarray or frozen(value) or not (
                self._named(index) or (self.auto and large(value))):
            return None
        key = content_key(value)
        if key is None:  # (an array of objects: not named, it goes by value as it is)
            return None
        return copy_of(value, key)

    def _keep_cached(self, rec: CallRecord) -> None:
        """A call written at once keeps its cached operands as they are now (`held`).
        A call without keywords, where only named parameters are cached (the usual plan:
        ``cache = ["b"]`` caches position 1 and keyword b), looks at just those positions: a
        frozen operand costs a walk of its bases, ~0.2 us, where the general loop over
        every argument cost ~0.9 us."""
        if rec.kwargs or self.auto or self.rest_from is not None:  # (names: keywords only)
            keep = self.keep()
            if keep is not None:
                rec.args, rec.kwargs = kept(rec.args, rec.kwargs, keep)
            return
        args = rec.args
        for i in self.positions:
            c = self.held(i, args[i]) if i < len(args) else None  # (None: kept as it is)
            if c is not None:
                if args is rec.args:
                    args = list(args)
                args[i] = c
        rec.args = args

    def keep(self) -> Keep | None:
        """`held`, if this binding caches any argument (snapshot.py's ``keep``)."""
        caches = (self.positions or self.names or self.auto or self.rest_from is not None
                  or self.other_names is not None)
        return self.held if caches else None
