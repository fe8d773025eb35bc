"""What `import polybus` gives a program: every name of ``__all__`` resolves, and the
errors a client catches are the classes of polybus.errors (``except
polybus.RemoteException`` is the first thing a user coming from Ray writes)."""

from __future__ import annotations

import concurrent.futures

import polybus
import polybus.errors


def test_every_public_name_resolves() -> None:
    missing = [name for name in polybus.__all__ if not hasattr(polybus, name)]
    assert not missing


def test_the_errors_a_client_catches_are_at_the_top_and_are_the_same_classes() -> None:
    for name in ("RemoteException", "RemoteError", "PolybusError", "CallTimeoutError",
                 "BusyError", "WorkerDiedError", "NoReplicaError", "ConfigError",
                 "CancelledError"):
        assert getattr(polybus, name) is getattr(polybus.errors, name)
    assert issubclass(polybus.RemoteException, polybus.PolybusError)
    # (caught as concurrent.futures' own, as code ported from it or Dask catches it)
    assert issubclass(polybus.CancelledError, concurrent.futures.CancelledError)
    assert issubclass(polybus.CancelledError, polybus.PolybusError)
