"""Shared test settings: every test starts from a clean polybus client state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _no_active_session() -> Iterator[None]:
    """A test that fails inside a run must not leave its session active for the next."""
    yield
    from polybus.client.stubs import activate

    activate(None)
