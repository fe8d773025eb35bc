"""``coalesce`` where nothing reaches the module over shm does nothing (configuration.md:
"On other transports it does nothing"), and is said as the other no-effect settings are
(config/notes.py): a new-user trial set ``coalesce = "50ms"`` on a tcp module and
nothing said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate
from polybus.testing.apps import write_one_call_app

SET = ("modules.server.coalesce=50ms",)
NOTE = ("coalesce does nothing here: it holds back the bell that wakes a client for an "
        "answer over shm, and module 'server' has transport = \"{}\" (no binding to it "
        "asks for shm)")


@pytest.mark.parametrize(("sets", "transport"), [
    ((), "tcp"),                                                        # the default
    (('modules.server.transport="ipc"',), "ipc"),
    (('modules.client.use.f.transport="ipc"',), "tcp"),
    (('modules.server.transport="shm"',), None),
    (('modules.client.use.f.transport="shm"',), None),                  # a binding over shm
    (('modules.server.transport="shm"', 'modules.client.use.f.transport="tcp"'), None),
])
def test_coalesce_where_nothing_reaches_the_module_over_shm_is_a_warning(
        tmp_path: Path, sets: tuple[str, ...], transport: str | None) -> None:
    """A binding that asks for shm makes it count (its connections hold bells back); a
    module of transport shm is left alone whatever its bindings say (its replicas stop
    spinning: an effect)."""
    app = write_one_call_app(tmp_path)
    cfg, problems = validate(str(app), (*SET, *sets))
    assert problems == [] and cfg is not None
    want = [] if transport is None else [("--set", "modules.server.coalesce",
                                          NOTE.format(transport))]
    assert [(n.file, n.key, n.bare_message) for n in cfg.notes] == want


def test_coalesce_in_the_file_is_blamed_on_the_file(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server_keys='coalesce = "50ms"')
    cfg, problems = validate(str(app))
    assert problems == [] and cfg is not None
    [note] = cfg.notes
    assert (note.file, note.key) == (str(app), "modules.server.coalesce")
    assert note.hint == 'set transport = "shm" on the module or on a binding to it, or leave ' \
        "coalesce out"
