"""The checks every configuration goes through, said of a MIL file in MIL's words and
at its lines (config/milfile.py): a new-user trial was told, of a .cfg file, to "add to
[bind]", that a module declared in it "does not exist", and got its warnings with no
line."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate
from polybus.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CLIENT = '''from polybus import use

square = use("square")
total = use("total")
slow = use("slow")


def main(n):
    return total([square(i) for i in range(n)]), slow(2)
'''
SERVER = "def square(x):\n    return x * x\n\n\ndef total(xs):\n    return sum(xs)\n\n\n" \
         "def slow(x):\n    return x + 1000\n"
MODULES = '''module client {
    source = "client.py" ::
    entrypoint = "main" ::
    args = [10] ::
    use interface square : callstyle = "async" ::
    use interface slow : callstyle = "async" ::
}
module server {
    source = "server.py" ::
    replication = 2 ::
}
'''
APP = '''module myapp {
    instance client ::
    instance server ::
    bind client square server square ::
    bind client total server total ::
    bind client slow server slow ::
}
'''


def _errors(tmp_path: Path, text: str) -> list[ConfigError]:
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "app.cfg").write_text(text)
    config, errors = validate(tmp_path / "app.cfg")
    assert config is None
    return errors


def test_a_module_declared_but_not_instanced_is_said_so_at_each_bind(tmp_path: Path) -> None:
    """It said "binding target module 'server' does not exist (modules: client)"."""
    errors = _errors(tmp_path, MODULES + APP.replace("    instance server ::\n", ""))
    cfg = tmp_path / "app.cfg"
    assert [(e.file, e.key) for e in errors] == [
        (f"{cfg}:14", 'bind."client.square"'), (f"{cfg}:15", 'bind."client.total"'),
        (f"{cfg}:16", 'bind."client.slow"')]
    for e in errors:
        assert e.bare_message == ("module 'server' is declared (line 8) but not listed by "
                                  "'instance' in the application module 'myapp'")
        assert e.hint == "add 'instance server ::' to module myapp"


def test_a_file_with_no_application_module_is_told_so_in_mil(tmp_path: Path) -> None:
    """It said: unbound interface 'square' (add to [bind]: "client.square" =
    "server.square"), TOML's advice in a .cfg file."""
    errors = _errors(tmp_path, MODULES)
    square = next(e for e in errors if e.key == "modules.client.use.square")
    assert square.file == f"{tmp_path / 'app.cfg'}:5"
    assert square.hint is not None and "[bind]" not in square.hint
    assert ("this file has no application module, the one with the 'instance' and 'bind' "
            "statements; add one" in square.hint)
    assert "bind client square server square ::" in square.hint
    assert all("[bind]" not in (e.hint or "") for e in errors)


def test_an_unbound_interface_is_given_the_bind_statement_to_add(tmp_path: Path) -> None:
    errors = _errors(tmp_path, MODULES + APP.replace("    bind client slow server slow ::\n",
                                                     ""))
    slow = next(e for e in errors if e.key == "modules.client.use.slow")
    assert slow.file == f"{tmp_path / 'app.cfg'}:6"
    assert slow.hint == ("client's bound names: square, total; or add 'bind client slow "
                         "server slow ::' to module myapp")
    # a use() in the source with no statement of the file: the application's line
    errors = _errors(tmp_path, MODULES + APP.replace("    bind client total server total ::\n",
                                                     ""))
    total = next(e for e in errors if e.key == 'bind."client.total"')
    assert total.file == f"{tmp_path / 'app.cfg'}:12"
    assert total.hint == ("client's bound names: slow, square; or add 'bind client total "
                          "server total ::' to module myapp")


def test_an_interface_the_defines_leave_out_is_given_the_define_statement(
        tmp_path: Path) -> None:
    text = MODULES.replace("    replication = 2 ::\n", "    replication = 2 ::\n"
                           "    define interface square ::\n    define interface slow ::\n")
    errors = _errors(tmp_path, text + APP)
    total = next(e for e in errors if e.key == 'bind."client.total"')
    assert total.file == f"{tmp_path / 'app.cfg'}:18"
    assert total.hint == "add 'define interface total ::' to module server"


def test_no_modules_or_no_entrypoint_is_advised_in_mil(tmp_path: Path) -> None:
    errors = _errors(tmp_path, "# nothing yet\n")
    assert [(e.key, e.hint) for e in errors] == [("modules", 'add module blocks, each with '
                                                  'a source: module server { source = '
                                                  '"server.py" :: }')]
    errors = _errors(tmp_path, MODULES.replace('    entrypoint = "main" ::\n', "") + APP)
    assert [(e.key, e.hint) for e in errors] == [("modules", 'exactly one module (the '
                                                  'client) needs entrypoint = "main" :: or '
                                                  'similar')]


def test_a_warning_is_at_its_line_and_in_mil(tmp_path: Path) -> None:
    """It said `warning: w.cfg: bind."client.totl": ... has no use.totl key ...`: no
    line, and a TOML key the file cannot have."""
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "server.py").write_text(SERVER)
    cfg = tmp_path / "w.cfg"
    cfg.write_text(MODULES + APP.replace("    bind client slow server slow ::\n",
                                         "    bind client slow server slow ::\n"
                                         "    bind client totl server total ::\n"))
    config, errors = validate(cfg)
    assert errors == [] and config is not None
    assert [(n.file, n.key, n.bare_message, n.hint) for n in config.notes] == [
        (f"{cfg}:18", 'bind."client.totl"', "module 'client' (client.py) never calls "
         "use('totl') and has no 'use interface totl' statement: nothing uses this binding",
         "did you mean 'total'?")]


def test_a_warning_of_an_override_says_where_it_was_written(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "server.py").write_text(SERVER)
    cfg = tmp_path / "w.cfg"
    cfg.write_text(MODULES + APP)
    config, errors = validate(cfg, ['cluster.listen_host="0.0.0.0"'])
    assert errors == [] and config is not None
    assert [(n.file, n.key) for n in config.notes] == [("--set", "cluster.listen_host")]
    cfg.write_text(MODULES + APP.replace("}", '    listen_host = "0.0.0.0" ::\n}'))
    config, errors = validate(cfg)
    assert config is not None
    assert [(n.file, n.key, n.hint) for n in config.notes] == [
        (f"{cfg}:18", "cluster.listen_host", "set tls = { cert = ..., key = ..., ca = ... } "
         ":: in the application module (docs/security.md), or keep it on a network you trust")]


def test_a_shared_queue_warning_advises_a_module_block(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "server.py").write_text(SERVER)
    cfg = tmp_path / "q.cfg"
    cfg.write_text(MODULES.replace("    replication = 2 ::\n", "    replication = 2 ::\n"
                                   "    define interface square : queue = 4 ::\n"
                                   "    define interface total : queue = 100 ::\n"
                                   "    define interface slow ::\n") + APP)
    config, errors = validate(cfg)
    assert errors == [] and config is not None
    note = config.notes[0]  # (slow's default queue, 1000, leaves square's and total's)
    assert note.file == f"{cfg}:11"
    assert note.hint is not None and note.hint.endswith(
        "put square in a module of its own: another module block with the same source")


@pytest.mark.parametrize("name", ["app.cfg", "app.toml"])
def test_replication_set_on_an_interface_is_pointed_to_the_module(name: str) -> None:
    """MIL writes replication on the define interface; set there, it was an unknown key
    listing the define keys, with no word of where it goes."""
    _, errors = validate(EXAMPLES / "dna" / name, ["modules.server.define.compare.replication=3"])
    (e,) = errors
    assert (e.file, e.key) == ("--set", "modules.server.define.compare.replication")
    assert e.hint is not None and e.hint.startswith(
        "replication belongs to the module, not an interface: --set "
        "modules.server.replication=3")
    assert ("MIL writes it on the define interface statement" in e.hint) == name.endswith(".cfg")


def test_replication_in_a_toml_define_table_is_pointed_to_the_module(tmp_path: Path) -> None:
    toml = (EXAMPLES / "dna" / "app.toml").read_text()
    (tmp_path / "app.toml").write_text(toml.replace("replication = 2\n", "").replace(
        'priority = "len(query)"', 'priority = "len(query)", replication = 2'))
    for src in ("client.py", "server.py"):
        (tmp_path / src).write_text((EXAMPLES / "dna" / src).read_text())
    _, errors = validate(tmp_path / "app.toml")
    hints = {e.key: e.hint for e in errors}
    assert hints["modules.server.define.compare.replication"] == (
        "replication belongs to the module, not an interface: modules.server.replication")
