"""A load ratio on an async-demand binding: demand hands each call to whichever replica
has room (client/dispatch.py), so the ratio is said to do nothing, never that a replica
at share 0 gets none of the calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

SERVER = "def slow(i):\n    return i\n"
CLIENT = '''\
from polybus import use

slow = use("slow")


def main():
    return [slow(i) for i in range(100)]
'''
APP = '''\
[modules.server]
source = "server.py"
replication = "a,b"

[modules.client]
source = "client.py"
entrypoint = "main"
use.slow = { callstyle = "async-demand(2)", loadratio = "1:9" }

[bind]
"client.slow" = "server.slow"
'''
KEY = "modules.client.use.slow.loadratio"
NO_EFFECT = ('loadratio has no effect under callstyle = "async-demand(2)": demand hands '
             "each call to whichever replica has room, so the shares are not applied")
INSTEAD = ('for a static split, use callstyle = "async" with this loadratio; to give faster '
           'replicas more, balance = "steal", or async-demand without a loadratio')


def notes(tmp_path: Path, overrides: tuple[str, ...] = ()) -> list[tuple[str, str | None,
                                                                          str, str | None]]:
    """(file as the user sees it, key, message, hint) of every note of a valid app."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(APP)
    cfg, errors = validate(str(path), overrides)
    assert errors == [] and cfg is not None
    return [("file" if n.file == str(path) else n.file, n.key, n.bare_message, n.hint)
            for n in cfg.notes]


def test_a_loadratio_under_async_demand_is_said_to_do_nothing(tmp_path: Path) -> None:
    # The split was 50/50 whatever the ratio, and check said nothing.
    assert notes(tmp_path) == [("file", KEY, NO_EFFECT, INSTEAD)]


def test_a_zero_share_under_async_demand_is_not_said_to_get_none(tmp_path: Path) -> None:
    # "it gets none of these calls" was said, and 'a' ran half of them.
    assert notes(tmp_path, (f"{KEY}=[0,1]",)) == [(
        "--set", KEY, NO_EFFECT + ": replica 'a' of module 'server', at share 0, gets calls "
        "like the others", INSTEAD)]


@pytest.mark.parametrize("style", ["async-demand(auto)", "async-demand(4)"])
def test_stealing_or_a_migration_line_does_not_make_the_ratio_apply(
        tmp_path: Path, style: str) -> None:
    for also in ('modules.client.use.slow.balance="steal"', 'modules.server.replication="a#b"'):
        found = notes(tmp_path, (f"modules.client.use.slow.callstyle={style}", also))
        assert [(f, k, m.split(":")[0]) for f, k, m, _ in found] == [
            ("file", KEY, f'loadratio has no effect under callstyle = "{style}"')], also


def test_the_same_ratio_under_async_is_applied_and_said_nothing_of(tmp_path: Path) -> None:
    assert notes(tmp_path, ("modules.client.use.slow.callstyle=async",)) == []


def test_balance_least_with_a_loadratio_is_refused_and_under_demand_said_idle(
        tmp_path: Path) -> None:
    """``balance = "least"`` picks by load; with a loadratio (a split by share) one of
    them would be ignored, so it is an error; under async-demand, which already picks
    the least loaded replica with room, it is said to do nothing."""
    notes(tmp_path)  # (writes the app)
    path = tmp_path / "app.toml"
    cfg, errors = validate(str(path), ['modules.client.use.slow.callstyle="async"',
                                       'modules.client.use.slow.balance="least"'])
    assert cfg is None
    assert [(e.key, e.hint) for e in errors] == [
        ("modules.client.use.slow.balance", "keep one of them")]
    assert "cannot both decide" in errors[0].bare_message
    said = notes(tmp_path, ('modules.client.use.slow.balance="least"',
                            "modules.client.use.slow.loadratio=[1, 1]"))
    assert ("--set", "modules.client.use.slow.balance",
            'balance = "least" has no effect under callstyle = "async-demand(2)": demand '
            "already hands each call to the least loaded replica with room", None) in said
    cfg, errors = validate(str(path), ['modules.client.use.slow.callstyle="async"',
                                       'modules.client.use.slow.balance="least"',
                                       "modules.client.use.slow.loadratio=[1, 1]"])
    assert cfg is None and len(errors) == 1
