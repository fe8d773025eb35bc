"""A run's replicas started by hand, applying other settings than this run's: said.

Workers started by hand (``polybus worker``, at a registry a run or ``polybus serve``
is given) apply the settings of their own configuration, not the run's: a ``--set``
given to the run reaches none of them, nor an edit of the file made since they started,
and a worker of ``--module`` applies the defaults. Each registers what it applies
(config/workerside.py); once the session has chosen a module's replicas, each setting
that differs is said once (a ConfigWarning, at the place that gave this run's value:
the file's line, the ``--set``, or the default), with the replicas concerned, their
value and this run's. None is said where they agree, whoever gave this run its value.
From Python the warning is placed at the program's call of `polybus.run` (or
`serve`), as the configuration's notes are; in a sweep it is one warning whichever
replicas each run took in turn (its ``KIND``: saidonce.py).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import MutableSet, Sequence
from typing import TYPE_CHECKING, Any

from polybus.config import load_document, placed
from polybus.config.origin import written_by
from polybus.config.overrides import parse_key_path
from polybus.config.workerside import differences, setting_key
from polybus.errors import ConfigError, ConfigWarning
from polybus.saidonce import KIND
from polybus.transport.shm import ShmChannel
from polybus.wire.messages import Replica

if TYPE_CHECKING:
    from polybus.config.model import AppConfig

__all__ = ["say_other_settings"]

_HINT = ("start the workers with the same --set, or from the configuration this run "
         "uses (`polybus worker --config FILE --as {module}`), or give this run theirs")


_POLYBUS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _outside() -> int:
    """The ``stacklevel`` of the first caller outside polybus, for a warning of the
    function that calls this: the program's call of `polybus.run` (or `serve`), where a
    configuration's notes are placed, not polybus's own line of the session."""
    level, frame = 2, sys._getframe(2)  # (1: the function that warns)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_POLYBUS):
        level, frame = level + 1, frame.f_back
    return level


def _written(doc: dict[str, Any] | None, key: str) -> bool:
    """Whether the configuration document ``doc`` holds dotted ``key``."""
    node: Any = doc
    try:
        parts = parse_key_path(key)
    except ConfigError:
        return False
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def say_other_settings(app: AppConfig, module: str, made: Sequence[tuple[Replica, object]],
                       said: MutableSet[str]) -> None:
    """Warn of each setting of ``module``'s chosen replicas (workers by hand; ``made``:
    each with its connection) that is not what ``app`` (the file and this run's
    overrides) gives them, once a session and key (``said``), said at the place that
    gave this run's value. Whether a replica orders calls by priority is compared where
    its connection is an shm ring's (config/workerside.py)."""
    spec = app.modules[module]
    rings = {r.name for r, ch in made if isinstance(ch, ShmChannel)}
    found = [d for d in differences(spec, [(r.name, r.settings) for r, _ in made], rings)
             if f"{module} setting {d.key}" not in said]
    if not found:
        return
    try:
        doc: dict[str, Any] | None = load_document(app.path)
    except ConfigError:  # (changed since it was read: said at the file, without its
        doc = None        # line, and not taken for the default)
    hint = _HINT.format(module=module)
    for d in found:
        said.add(f"{module} setting {d.key}")
        key = setting_key(spec, d.key)
        text = f"the replicas started by hand apply their own {d.key}: {d.text()}"
        if doc is None or written_by(app.overridden, key) or _written(doc, key):
            err = placed(ConfigError(text, key=key, hint=hint), app)
        else:  # (neither the file nor the overrides wrote it)
            err = ConfigError(f"{text} (the default)", file=str(app.path), key=key,
                              hint=hint)
        warning = ConfigWarning(str(err))
        setattr(warning, KIND, f"{module} setting {d.kind()}")  # (saidonce.py: one kind
        warnings.warn(warning, stacklevel=_outside())           # whichever replicas)
