"""Migration conditions on global load (config/loadbound.py): ``load>=mean+2``,
``load>2*peer``, ``load<=min``, in TOML, in --set and in CORD's MIL notation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from polybus.config import load, parse_replication, validate
from polybus.config.model import LOAD_NAMES, Condition, ReplicaSpec
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GLOBAL = "harvey(oc=(load>=mean+2))#bugs(uc=(load<mean)):[1/2]"


def oc(text: str) -> Condition:
    overload = parse_replication(f"a(oc=({text}))#b", "s")[0][0].overload
    assert overload is not None
    return overload


@pytest.mark.parametrize(("text", "cond", "written"), [
    ("load>=mean+2", Condition(">=", 2, "mean"), "load>=mean+2"),
    ("load<mean", Condition("<", 0, "mean"), "load<mean"),
    ("load>2*mean", Condition(">", 0, "mean", 2.0), "load>2*mean"),
    ("load<=min", Condition("<=", 0, "min"), "load<=min"),
    ("load>=max-1", Condition(">=", -1, "max"), "load>=max-1"),
    ("load==total", Condition("==", 0, "total"), "load==total"),
    ("load > 1.5 * peer + 3", Condition(">", 3, "peer", 1.5), "load>1.5*peer+3"),
    ("load!=0.5*mean-2", Condition("!=", -2, "mean", 0.5), "load!=0.5*mean-2"),
])
def test_a_condition_on_global_load(text: str, cond: Condition, written: str) -> None:
    assert oc(text) == cond
    assert str(cond) == written
    assert oc(written) == cond  # (its text form reads back as itself)


def test_the_paper_form_with_global_conditions() -> None:
    replicas, _ = parse_replication(GLOBAL, "s")
    assert replicas == (ReplicaSpec("harvey", overload=Condition(">=", 2, "mean")),
                        ReplicaSpec("bugs", underload=Condition("<", 0, "mean")))


def test_a_plain_number_keeps_its_condition_and_text_form() -> None:
    cond = oc("load>=10")
    assert cond == Condition(">=", 10) and cond.name is None
    assert repr(cond) == "Condition(op='>=', value=10)"
    assert str(cond) == "load>=10"
    assert cond.holds(10) and not cond.holds(9)


def test_a_global_condition_holds_against_the_values_it_is_given() -> None:
    cond = Condition(">=", 2, "mean", 2.0)  # load >= 2*mean + 2
    assert cond.holds(8, {"mean": 3}) and not cond.holds(7, {"mean": 3})
    assert cond.holds(7, {"mean": 2.5})  # (mean is not rounded: 2*2.5 + 2 = 7)
    with pytest.raises(ValueError, match="needs the value of 'mean'"):
        cond.holds(8)


def bound_error(text: str) -> tuple[int, str, str]:
    with pytest.raises(ConfigError) as info:
        parse_replication(text, "s")
    message = info.value.bare_message
    assert repr(text) in message
    number, rest = message.split("at position ", 1)[1].split(":", 1)
    return int(number), rest.strip(), info.value.hint or ""


@pytest.mark.parametrize(("text", "position", "expected"), [
    ("a(oc=(load>=meen))#b", 12, "unknown load name 'meen' (did you mean 'mean'?)"),
    ("a(oc=(load>=Mean+2))#b", 12, "unknown load name 'Mean' (did you mean 'mean'?)"),
    ("a(uc=(load<=mni))#b", 12, "unknown load name 'mni' (did you mean 'min'?)"),
    ("a(oc=(load>2*pear))#b", 13, "unknown load name 'pear' (did you mean 'peer'?)"),
    ("a(oc=(load>=average))#b", 12,
     "unknown load name 'average' (one of mean, min, max, total, peer)"),
    ("a(oc=(load>=mean*2))#b", 16, "the factor goes before the name, as in 2*mean"),
    ("a(oc=(load>=0*mean))#b", 12, "factor 0 is not more than 0"),
    ("a(oc=(load>=2*5))#b", 14,
     "expected a load name (mean, min, max, total, peer) after '2*', found '5'"),
    ("a(oc=(load>=mean+))#b", 17, "expected a whole number after '+', found ')'"),
    ("a(oc=(load>=mean-x))#b", 17, "expected a whole number after '-', found 'x'"),
    ("a(oc=(load>=mean+2+1))#b", 18, "one '+N' or '-N' after the name: write their sum"),
    ("a(oc=(load>=mean+1.5))#b", 17, "the offset after the name is a whole number, not "
                                     "1.5 (only a factor, before the name, has a fraction: "
                                     "1.5*mean)"),
    ("a(oc=(load>=10+2))#b", 14, "'+' and '-' follow a load name (mean+2), not a number: "
                                 "write the whole number itself"),
    ("a(oc=(load>=2.5))#b", 12, "2.5 is not a whole number (a factor is followed by '*' "
                                "and a load name)"),
    ("a(oc=(load>=))#b", 12,
     "expected a whole number or a load name (mean, min, max, total, peer), found ')'"),
])
def test_a_bad_bound_says_where_and_what(text: str, position: int, expected: str) -> None:
    where, message, hint = bound_error(text)
    assert (where, message) == (position, expected)
    assert "oc=(load>=10)" in hint and all(name in hint for name in LOAD_NAMES)


def test_a_misspelt_name_is_a_config_error_at_its_file_and_key(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server_keys='replication = "a(oc=(load>=meen+2))#b"')
    _, found = validate(app)
    assert [(e.file, e.key) for e in found] == [(str(app), "modules.server.replication")]
    assert "unknown load name 'meen' (did you mean 'mean'?)" in str(found[0])
    _, found = validate(app, ("modules.server.replication=a#b(uc=(load<=mni))",))
    assert [(e.file, e.key) for e in found] == [("--set", "modules.server.replication")]
    assert "did you mean 'min'?" in str(found[0])


def test_set_takes_a_global_condition(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path)
    config = load(app, (f"modules.server.replication={GLOBAL}",))
    assert config.modules["server"].replication == parse_replication(GLOBAL, "server")[0]


def _example(tmp_path: Path, replication: str) -> Path:
    """examples/mandelbrot in ``tmp_path``, its ring replaced by ``replication`` in both
    of its configurations; the path of the directory."""
    shutil.copytree(EXAMPLES / "mandelbrot", tmp_path / "m")
    ring = '"harvey:speed=0.24#rimfire:speed=0.51#thumper:speed=0.58"\n'
    cfg = tmp_path / "m" / "app.cfg"
    text = cfg.read_text()
    assert ring in text
    start = text.index(ring)
    end = text.index("\n", start + len(ring)) + 1  # (the string goes on a second line)
    cfg.write_text(text[:start] + f'"{replication}"\n' + text[end:])
    toml = tmp_path / "m" / "app.toml"
    lines = [f'replication = "{replication}"' if line.startswith("replication =") else line
             for line in toml.read_text().splitlines()]
    toml.write_text("\n".join(lines) + "\n")
    return tmp_path / "m"


def test_mil_takes_the_same_global_conditions(tmp_path: Path) -> None:
    line = "harvey(oc=(load>=mean+2))#rimfire(uc=(load<=min))#thumper(oc=(load>2*peer))#harvey"
    where = _example(tmp_path, line)
    mil, toml = load(where / "app.cfg"), load(where / "app.toml")
    assert mil.modules["server"].replication == toml.modules["server"].replication
    assert mil.modules["server"].migration == toml.modules["server"].migration
    by_name = {r.name: r for r in mil.modules["server"].replication}
    assert by_name["harvey"].overload == Condition(">=", 2, "mean")
    assert by_name["rimfire"].underload == Condition("<=", 0, "min")
    assert by_name["thumper"].overload == Condition(">", 0, "peer", 2.0)


def test_mil_says_a_misspelt_name_at_its_line(tmp_path: Path) -> None:
    where = _example(tmp_path, "harvey(oc=(load>=meen+2))#rimfire")
    cfg = where / "app.cfg"
    line = next(i for i, text in enumerate(cfg.read_text().splitlines(), 1) if "meen" in text)
    _, found = validate(cfg)
    assert [(e.file, e.key) for e in found] == [(f"{cfg}:{line}", "modules.server.replication")]
    assert "unknown load name 'meen' (did you mean 'mean'?)" in str(found[0])
