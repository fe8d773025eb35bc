"""A module with replicas that no [bind] entry or [serve] route names starts workers that
serve no call (config/notes.py `note_idle`): a new user's unbound module, or a client
module given ``replication = 2``, started them without a word, and `check` counted
them among the servers."""

from __future__ import annotations

from pathlib import Path

from polybus.config import validate

SORT = Path(__file__).resolve().parents[2] / "examples" / "sort" / "app.toml"
RUDY = Path(__file__).resolve().parents[2] / "examples" / "rudy" / "app.toml"


def _notes(path: Path, *sets: str) -> list[tuple[str | None, str]]:
    cfg, problems = validate(str(path), sets)
    assert problems == [] and cfg is not None, problems
    return [(n.key, n.bare_message) for n in cfg.notes if "nothing calls" in n.bare_message]


def test_a_client_module_given_replicas_is_said_to_start_idle_workers() -> None:
    [(key, note)] = _notes(SORT, "modules.client.replication=2")
    assert key == "modules.client.replication"
    assert note.startswith("module 'client' has 2 replicas but nothing calls it"), note


def test_an_unbound_module_is_said_to_start_idle_workers(tmp_path: Path) -> None:
    for f in SORT.parent.iterdir():
        if f.suffix in (".py", ".toml"):
            (tmp_path / f.name).write_text(f.read_text())
    app = tmp_path / "app.toml"
    app.write_text(app.read_text() + '\n[modules.spare]\nsource = "server.py"\n'
                   "replication = 1\n")
    [(key, note)] = _notes(app)
    assert key == "modules.spare.replication"
    assert note.startswith("module 'spare' has 1 replica but nothing calls it"), note


def test_bound_and_routed_modules_are_not() -> None:
    assert _notes(SORT) == []
    assert _notes(RUDY) == []  # (its module named by [serve] routes alone)
