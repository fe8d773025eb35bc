"""CORD's MIL notation (config/mil.py): the same document as the TOML it stands for,
and its mistakes at file:line(:column)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from polybus.config import load, load_document, validate
from polybus.config.mil import parse_mil
from polybus.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["dna", "mandelbrot"])
def test_an_example_in_mil_is_the_document_of_its_toml(example: str) -> None:
    toml = tomllib.loads((EXAMPLES / example / "app.toml").read_text())
    if example == "mandelbrot":  # (MIL declares the interface: the module serves it alone)
        toml["modules"]["server"]["define"] = {"mandel_row": {}}
    assert load_document(EXAMPLES / example / "app.cfg") == toml


def test_the_mil_example_validates_as_its_toml_does() -> None:
    mil = load(EXAMPLES / "dna" / "app.cfg")
    toml = load(EXAMPLES / "dna" / "app.toml")
    assert mil.modules["server"].replication == toml.modules["server"].replication
    assert mil.modules["server"].define == toml.modules["server"].define
    assert mil.modules["client"].use == toml.modules["client"].use
    assert mil.modules["client"].entrypoint == "main"


def _doc(text: str) -> dict[str, object]:
    return parse_mil(text, "a.cfg")[0]


def test_statements_map_to_modules_use_define_bind_and_cluster() -> None:
    doc = _doc('''
        module c {  # a comment
            source = "c.py" :: entrypoint = "main" :: args = [1, 2.5, "x", true] ::
            kwargs = { n = 3, name = "a" "b" } ::
            use interface f : callstyle = "async-demand(4)" : aggregate = 64 ::
        }
        module s {
            source = "s.py" ::
            define interface g : priority = "len(x)" : replication = "a,b" : cache = ["x"] ::
        }
        module app {
            instance c :: instance s : standalone ::
            bind c f s g ::
            max_frame = "1MiB" ::
        }''')
    assert doc == {
        "modules": {
            "c": {"source": "c.py", "entrypoint": "main", "args": [1, 2.5, "x", True],
                  "kwargs": {"n": 3, "name": "ab"},
                  "use": {"f": {"callstyle": "async-demand(4)", "aggregate": 64}}},
            "s": {"source": "s.py", "replication": "a,b",
                  "define": {"g": {"priority": "len(x)", "cache": ["x"]}}},
        },
        "bind": {"c.f": "s.g"},
        "cluster": {"max_frame": "1MiB"},
    }


def test_declarations_are_read_and_left_out() -> None:
    doc = _doc('''module s { source = "s.py" :: interface = "stdio" ::
                  define interface g : pattern = { string } : returns = { integer }
                                     : interface = "null" :: }''')
    assert doc == {"modules": {"s": {"source": "s.py", "define": {"g": {}}}}}


def test_only_the_instanced_modules_run() -> None:
    doc = _doc('module a { source = "a.py" :: } module b { source = "b.py" :: } '
               'module app { instance a :: }')
    assert doc == {"modules": {"a": {"source": "a.py"}}}


@pytest.mark.parametrize(("text", "where", "words"), [
    ('module c {\n  source = "c.py"\n}', "a.cfg:3:1", "expected '::' after the value of 'source'"),
    ("module c {\n  use interface f : callstyle \"async\" ::\n}", "a.cfg:2:31",
     "expected '=' after 'callstyle'"),
    ('module c { source = @ :: }', "a.cfg:1:21", "unexpected '@'"),
    ('module app { bind c f s :: }', "a.cfg:1:25", "expected 4 names after 'bind'"),
    ('module c { x = { a, b = 1 } :: }', "a.cfg:1:21", "mix 'name = value' and bare names"),
    ('module c { }\nmodule c { }', "a.cfg:2:8",
     "module 'c' is declared twice (first at line 1)"),
    ('module c { source = "c.py" ::', "a.cfg:1:30",
     "module 'c' is not closed: '}' expected, found the end of the file"),
    ('module s { define interface g : replication = 2 :: '
     'define interface h : replication = 3 :: }', "a.cfg:1:73", "two replications"),
    ('module a { source = "a.py" :: } module app { instance s :: }', "a.cfg:1:55",
     "'instance s' in module 'app' names no module declared here"),
    ('module app { instance c :: use interface f :: }', "a.cfg:1:8",
     "the application module only instantiates and binds"),
])
def test_a_mistake_in_the_notation_says_where(text: str, where: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_mil(text, "a.cfg")
    assert info.value.file == where
    assert words in str(info.value)


def test_two_application_modules_are_refused() -> None:
    with pytest.raises(ConfigError, match="2 application modules"):
        parse_mil("module a { bind c f s g :: } module b { bind c h s g :: }", "a.cfg")


def test_an_instance_misspelt_is_given_the_nearest_module() -> None:
    with pytest.raises(ConfigError) as info:
        parse_mil('module server { source = "s.py" :: } module app { instance sever :: }',
                  "a.cfg")
    assert info.value.hint == "did you mean 'server'?"


def test_a_later_check_names_the_line_of_the_statement(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def g(x):\n    return x\n")
    (tmp_path / "c.py").write_text("from polybus import use\ng = use('g')\n\n"
                                   "def main():\n    return g(1)\n")
    cfg = tmp_path / "app.mil"
    cfg.write_text('module c {\n  source = "c.py" ::\n  entrypoint = "main" ::\n'
                   '  use interface g\n    : callstyel = "async" ::\n}\n'
                   'module s {\n  source = "s.py" ::\n'
                   '  define interface g : priority = "len(y)" ::\n}\n'
                   'module app { instance c :: instance s :: bind c g s g :: }\n')
    config, errors = validate(cfg)
    assert config is None
    by_key = {e.key: e for e in errors}
    assert by_key["modules.c.use.g.callstyel"].file == f"{cfg}:5"
    assert by_key["modules.c.use.g.callstyel"].hint == "did you mean 'callstyle'?"
    assert by_key["modules.s.define.g.priority"].file == f"{cfg}:9"
    # an override's mistake says where it was written, not a line of the file
    _, errors = validate(cfg, ["modules.s.replication=two"])
    assert any(e.key == "modules.s.replication" and e.file != f"{cfg}:8" for e in errors)


@pytest.mark.parametrize("name", ["app.toml", "app.cfg"])
def test_a_file_that_starts_with_a_byte_order_mark_reads_as_without_it(
        tmp_path: Path, name: str) -> None:
    """Notepad's UTF-8 starts with a BOM: tomllib said 'Invalid statement (at line 1,
    column 1)' and the MIL reader "unexpected '\\ufeff'"."""
    text = (EXAMPLES / "dna" / name).read_text()
    (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_document(tmp_path / name) == load_document(EXAMPLES / "dna" / name)
    # a mistake on line 1 is still at its column as an editor shows it
    (tmp_path / "bad.cfg").write_bytes(b"\xef\xbb\xbfmodule c { source = @ :: }")
    with pytest.raises(ConfigError) as info:
        load_document(tmp_path / "bad.cfg")
    assert info.value.file == f"{tmp_path / 'bad.cfg'}:1:21"


APP = '''module client {
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
module myapp {
    instance client ::
    instance server ::
    bind client square server square ::
    bind client total server total ::
    bind client slow server slow ::
}
'''


def _with(after: str, line: str) -> str:
    """APP with ``line`` added after the first line that holds ``after``."""
    lines = APP.splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if after in text)
    return "".join([*lines[:at + 1], line + "\n", *lines[at + 1:]])


@pytest.mark.parametrize(("after", "line", "where", "words"), [
    # a second bind of client.slow replaced the first: check said ok, run computed wrong
    ("bind client slow", "    bind client slow server square ::", "a.cfg:18:10",
     "'client.slow' is bound twice (first at line 17: bind client slow server slow)"),
    ("bind client slow", "    bind client slow server slow ::", "a.cfg:18:10",
     "'client.slow' is bound twice (first at line 17"),
    ("args", "    args = [12] ::", "a.cfg:5:5", "module 'client' sets 'args' twice "
     "(first at line 4)"),
    ("source", '    source = "other.py" ::', "a.cfg:3:5",
     "module 'client' sets 'source' twice (first at line 2)"),
    ("replication", "    replication = 3 ::", "a.cfg:11:5",
     "module 'server' sets 'replication' twice (first at line 10)"),
    ("replication", "    define interface square : replication = 3 ::", "a.cfg:11:31",
     "module 'server' is given two replications (first at line 10)"),
    ("instance server", "    heartbeat = 1 :: heartbeat = 2 ::", "a.cfg:15:22",
     "module 'myapp' sets 'heartbeat' twice (first at line 15)"),
    ("instance server", "    instance server ::", "a.cfg:15:14",
     "module 'server' is instanced twice (first at line 14)"),
    ("use interface square", '    use interface square : callstyle = "sync" ::', "a.cfg:6:19",
     "module 'client' uses interface 'square' twice (first at line 5)"),
    ("replication", "    define interface square : pool = 2 ::\n"
     "    define interface square : pool = 3 ::", "a.cfg:12:22",
     "module 'server' defines interface 'square' twice (first at line 11)"),
    ("replication", "    define interface square : pool = 2 : pool = 3 ::", "a.cfg:11:42",
     "'define interface square' sets 'pool' twice"),
    ("args", "    kwargs = { n = 1, n = 2 } ::", "a.cfg:5:23",
     "'n' is given twice in the braces of 'kwargs'"),
    ("replication", '    interface = "stdio" :: interface = "null" ::', "a.cfg:11:28",
     "module 'server' sets 'interface' twice (first at line 11)"),
])
def test_a_key_interface_or_statement_given_twice_is_refused_where_and_first(
        after: str, line: str, where: str, words: str) -> None:
    """TOML refuses a key written twice; MIL took the last silently (a second bind of
    the same name made `check` say ok and `run` call the wrong interface)."""
    with pytest.raises(ConfigError) as info:
        parse_mil(_with(after, line), "a.cfg")
    assert info.value.file == where
    assert words in str(info.value)


def test_replication_restated_alike_on_each_interface_is_one_replication() -> None:
    """CORD writes replication on the interface: a module serving two may say it on
    each, as long as they agree (and agree with the module's own key)."""
    doc = _doc('module s { source = "s.py" :: replication = 2 :: '
               'define interface f : replication = 2 :: define interface g : replication = 2 :: }')
    assert doc["modules"] == {"s": {"source": "s.py", "replication": 2,
                                    "define": {"f": {}, "g": {}}}}
