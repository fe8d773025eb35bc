"""polybus worker --name: a replica's name as a configuration's `replication` could
write it, or refused before anything starts, saying the rule. ``--name 'a b'`` and
``'a/b'`` registered and served, though no configuration could name that replica, and
``--name ''`` fell back to the default name unsaid."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli.main import main
from polybus.config.registrynames import REPLICA_NAME_MAX, replica_name_fault


@pytest.mark.parametrize("name", ["a b", "a/b", "", "-a", ".a", "a:b", "é", "a\n",
                                  "x" * (REPLICA_NAME_MAX + 1)])
def test_a_name_no_configuration_could_write_is_refused(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    # (registry 127.0.0.1:1: refused before it is dialled, so nothing answers there)
    code = main(["worker", "--registry", "127.0.0.1:1", "--module",
                 str(tmp_path / "server.py"), f"--name={name}"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("polybus worker: error: --name " + repr(name[:40])[:-1]), err
    assert "a replica's name" in err
    if len(name) > REPLICA_NAME_MAX:
        assert f"at most {REPLICA_NAME_MAX}" in err
    elif name:
        assert "ASCII letters, digits, '_', '.' and '-'" in err
    else:
        assert "is empty" in err


@pytest.mark.parametrize("name", ["server-0", "a", "_x", "4x", "host.example.org",
                                  "a_b-c.d", "x" * REPLICA_NAME_MAX])
def test_the_names_a_configuration_writes_are_taken(name: str) -> None:
    assert replica_name_fault(name) is None


def test_the_rule_is_the_one_replication_parses() -> None:
    # (each refused name is refused by replication too, each taken one taken)
    from polybus.config.replication import parse_replication
    from polybus.errors import ConfigError

    for name in ("a b", "a/b", "-a", "a:b"):
        assert replica_name_fault(name) is not None
        with pytest.raises(ConfigError):
            parse_replication(f"{name},other", "m")
    for name in ("server-0", "4x", "host.example.org"):
        assert replica_name_fault(name) is None
        assert parse_replication(f"{name},other", "m")[0][0].name == name


@pytest.mark.parametrize(("file", "begins"), [
    ("my server.py", "my_server-"), ("-x.py", "_x-"), (".x.py", "_x-"), ("é.py", "_-"),
    ("s" * 240 + ".py", "s" * 50)])
def test_the_default_name_is_one_the_rule_takes(
        file: str, begins: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --name a worker is named after its module's file, its host and its pid:
    `--module "my server.py"` was named "my server-HOST-PID", a name --name refuses; what
    the rule refuses is replaced with '_', and a long module's part cut to fit."""
    import os
    import socket

    from polybus.worker.main import Stopped

    (tmp_path / file).write_text("def f(x):\n    return x\n")
    seen: dict[str, object] = {}
    monkeypatch.setattr("polybus.worker.main.serve",  # (nothing listens)
                        lambda **kw: seen.update(kw) or Stopped(None, 0))
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    assert main(["worker", "--registry", "127.0.0.1:1", "--module", str(tmp_path / file)]) == 0
    name = str(seen["name"])
    assert replica_name_fault(name) is None, name
    assert name.startswith(begins), name
    assert name.endswith(f"-{socket.gethostname()}-{os.getpid()}"), name
    assert seen["module_key"] == Path(file).stem  # (the module's own name: as it was)
