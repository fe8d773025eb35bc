"""``cpus`` as written: the forms it takes, what each replica gets of them, and a clear
error for each mistake (config/cpus.py, `ModuleSpec.cpus_of`); where it is ignored or
does not reach, said (inclient.py, notes.py, workerside.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polybus.config import validate
from polybus.config.cpus import cpu_list
from polybus.config.workerside import applied
from polybus.testing.apps import write_one_call_app


def _load(tmp_path: Path, *sets: str, server_keys: str = "") -> Any:
    app = write_one_call_app(tmp_path, server_keys=server_keys)
    return validate(str(app), sets)


@pytest.mark.parametrize(("written", "want"), [
    ("[1]", (frozenset({1}),)),
    ("[0, 1, 1]", (frozenset({0, 1}),)),
    ("[[0], [1, 2]]", (frozenset({0}), frozenset({1, 2}))),
    ("[]", ()),
    ('"0-2,5"', (frozenset({0, 1, 2, 5}),)),  # (a CPU list, as taskset -c takes it)
    ('"1"', (frozenset({1}),)),
])
def test_the_forms_cpus_takes(tmp_path: Path, written: str, want: Any) -> None:
    cfg, problems = _load(tmp_path, f"modules.server.cpus={written}")
    assert problems == [] and cfg is not None
    assert cfg.modules["server"].cpus == want
    assert cfg.notes == ()


def test_each_replica_takes_its_list_cycled_and_others_take_them_all(tmp_path: Path) -> None:
    cfg, _ = _load(tmp_path, "modules.server.replication=3",
                   "modules.server.cpus=[[0], [1]]")
    m = cfg.modules["server"]
    assert [m.cpus_of(f"server-{i}") for i in range(3)] == [
        frozenset({0}), frozenset({1}), frozenset({0})]
    # a worker under a name the configuration does not give, and the client
    assert m.cpus_of("by-hand") == m.cpus_of(None) == frozenset({0, 1})
    assert cfg.modules["client"].cpus_of(None) is None


@pytest.mark.parametrize(("written", "said", "hint"), [
    ("3", 'or a CPU list as taskset -c takes it, such as "0-3,6"',
     'cpus names CPUs, not a count of them: [3] is CPU 3 alone, "0-2" the first 3'),
    ("true", "expected a list of CPU numbers", None),
    ('"3-1"', "cpus '3-1': '3-1' is not a CPU number or a range of them", "taskset -c"),
    ('"0,x"', "cpus '0,x': 'x' is not a CPU number or a range of them", "taskset -c"),
    ('"0-70000"', "cpus '0-70000': 70000 is not a CPU number", "at most 65535"),
    ("[0, [1]]", "cpus mixes numbers and lists: [0, [1]]", "either one list"),
    ("[[0], []]", "cpus list 1 is empty", "give at least one CPU number"),
    ("[-1]", "cpus holds -1, not a CPU number", "CPU numbers are from 0 to at most 65535"),
    ("[true]", "cpus holds True, not a CPU number", "whole numbers from 0"),
    ('[[0], ["1"]]', "cpus list 1 holds '1', not a CPU number", "whole numbers from 0"),
    ("[1.5]", "cpus holds 1.5, not a CPU number", "whole numbers from 0"),
])
def test_a_mistake_in_cpus_is_said_with_its_key(
        tmp_path: Path, written: str, said: str, hint: str | None) -> None:
    cfg, problems = _load(tmp_path, f"modules.server.cpus={written}")
    assert cfg is None
    [p] = problems
    assert p.key == "modules.server.cpus"
    assert said in p.bare_message
    if hint is not None:
        assert p.hint is not None and hint in p.hint


def test_cpus_in_the_file_is_blamed_on_the_file(tmp_path: Path) -> None:
    cfg, problems = _load(tmp_path, server_keys="cpus = [[]]")
    assert cfg is None
    [p] = problems
    assert p.file is not None and p.file.endswith("app.toml")
    assert "cpus list 0 is empty" in str(p)


def test_a_module_called_in_the_client_says_its_cpus_are_ignored(tmp_path: Path) -> None:
    cfg, problems = _load(tmp_path, "modules.server.replication=0", "modules.server.cpus=[0]")
    assert problems == [] and cfg is not None
    [note] = cfg.notes
    assert note.key == "modules.server.cpus"
    assert note.bare_message.startswith("cpus is ignored: module 'server' has replication = 0")
    assert "which the client module's cpus place" in note.bare_message


def test_where_nothing_can_be_pinned_cpus_is_said_to_do_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("polybus.config.notes.can_pin", lambda: False)
    cfg, problems = _load(tmp_path, "modules.client.cpus=[0]")
    assert problems == [] and cfg is not None
    [note] = cfg.notes
    assert (note.key, note.file) == ("modules.client.cpus", "--set")
    assert "cpus does nothing on this system" in note.bare_message


def test_cpus_is_a_setting_a_replica_applies_and_registers(tmp_path: Path) -> None:
    base, _ = _load(tmp_path)
    changed, _ = _load(tmp_path, "modules.server.cpus=[0]", "modules.client.cpus=[0]")
    # (what a worker by hand registers, and a run compares with its own: workerside.py)
    assert applied(base.modules["server"], "server-0")["cpus"] == "[]"
    assert applied(changed.modules["server"], "server-0")["cpus"] == "0"


@pytest.mark.parametrize(("cpus", "text"), [
    ({0}, "0"), ({0, 1, 2, 5}, "0-2,5"), ({3, 1}, "1,3"), ({7, 8, 9, 11, 12}, "7-9,11-12")])
def test_cpu_lists_are_written_as_taskset_takes_them(cpus: set[int], text: str) -> None:
    assert cpu_list(cpus) == text


def test_the_cpus_key_is_listed_for_the_module_table(tmp_path: Path) -> None:
    cfg, problems = _load(tmp_path, "modules.server.cpu=[0]")
    assert cfg is None
    [p] = problems
    assert p.key == "modules.server.cpu"
    assert p.hint is not None and "cpus" in p.hint
