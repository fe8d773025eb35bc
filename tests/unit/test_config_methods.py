"""A binding to a method, a Ray actor ported as it was (a class, an instance of it at
the top of the module): `check` says what the name is and the function to serve."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config_hints import CLIENT  # tests/unit (the same client, calling compare)

from polybus.config import validate

BASE = '''\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
args = [["ACGT"], "ACGT"]
use.compare = { callstyle = "async" }

[bind]
"client.compare" = "server.compare"
'''


def errors(tmp_path: Path, toml: str, server: str) -> list[tuple[str | None, str, str | None]]:
    """(key, message, hint) of every mistake."""
    (tmp_path / "server.py").write_text(server)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(toml)
    _, found = validate(str(path))
    return [(e.key, e.bare_message, e.hint) for e in found]


ACTOR = '''\
class Model:
    def __init__(self):
        self.n = 0

    def compare(self, query, entry):
        self.n += 1
        return self.n


model = Model()
'''


@pytest.mark.parametrize("target", ["server.model.compare", "server.compare"])
def test_a_method_of_a_class_or_object_says_only_functions_are_served(
        tmp_path: Path, target: str) -> None:
    # A Ray actor ported as it was, a class and an instance of it: binding its method
    # said only "module 'server' has no interface 'compare' (there are no interfaces of
    # server)", nothing of the method it saw, nor what to write instead.
    found = errors(tmp_path, BASE.replace('"server.compare"', f'"{target}"'), ACTOR)
    assert len(found) == 1, found
    iface = target.partition(".")[2]
    of = ("'model' (server.py:10: model = Model())" if "." in iface
          else "class Model (server.py:1)")
    assert found[0][1] == (f"module 'server' has no interface {iface!r}: an interface is a "
                           f"top-level function of server.py, and 'compare' is a method of "
                           f"{of}")
    assert found[0][2] == ("serve a function that calls it, in server.py: def compare(*args, "
                           "**kwargs): return model.compare(*args, **kwargs), bound as "
                           "\"server.compare\" (state kept between calls: docs/coming-from.md, "
                           "'an actor')")


def test_a_class_with_no_instance_gets_one_made_once_in_the_hint(tmp_path: Path) -> None:
    server = ACTOR.replace("\n\nmodel = Model()\n", "\n")
    found = errors(tmp_path, BASE, server)
    assert len(found) == 1, found
    assert found[0][2] is not None and found[0][2].startswith(
        "serve a function that calls it, in server.py: _model = Model(), then def "
        "compare(*args, **kwargs): return _model.compare(*args, **kwargs)")
    # a name that is no method anywhere still gets the list of interfaces
    found = errors(tmp_path, BASE.replace('"server.compare"', '"server.nothing"'), ACTOR)
    assert found[0][1] == "module 'server' has no interface 'nothing'"
