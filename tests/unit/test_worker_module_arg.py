"""polybus worker --module FILE: a file that is not there is said at once, with the
nearest Python file beside it, as `run` and `check` say a module source's typo."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli.main import build_parser
from polybus.errors import UsageError


def _worker(module: str) -> None:
    from polybus.cli import cmd_worker

    args = build_parser().parse_args(["worker", "--registry", "127.0.0.1:1", "--module", module])
    cmd_worker.main(args)


def test_a_typo_in_module_names_the_nearest_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as info:
        _worker("sevrer.py")
    assert str(info.value) == "--module: sevrer.py does not exist; did you mean 'server.py'?"


def test_a_missing_module_with_nothing_near_is_said_plainly(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        _worker(str(tmp_path / "zzz.py"))
    assert str(info.value) == f"--module: {tmp_path / 'zzz.py'} does not exist"


@pytest.mark.parametrize(("written", "hint"), [
    # unrelated names are not offered: "osexit.py" for "nonexist.py" was (difflib on the
    # whole names, ".py" alike in both, at 0.6)
    ("nonexist.py", None),
    ("nothing.py", None),
    # real typos still are: a letter swapped, left out, doubled, changed; case; no .py
    ("sevrer.py", "server.py"),
    ("sever.py", "server.py"),
    ("serverr.py", "server.py"),
    ("servor.py", "server.py"),
    ("Server.py", "server.py"),
    ("server", "server.py"),
    ("mian.py", "main.py"),
    ("osexti.py", "osexit.py"),
])
def test_only_a_likely_typo_is_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       written: str, hint: str | None) -> None:
    for name in ("osexit.py", "server.py", "main.py", "echo.py"):
        (tmp_path / name).write_text("def f(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as info:
        _worker(written)
    said = f"--module: {written} does not exist"
    assert str(info.value) == (said if hint is None else f"{said}; did you mean {hint!r}?")


def _worker_as(config: Path, key: str) -> None:
    from polybus.cli import cmd_worker

    args = build_parser().parse_args(["worker", "--registry", "127.0.0.1:1",
                                      "--config", str(config), "--as", key])
    cmd_worker.main(args)


@pytest.mark.parametrize(("key", "said"), [
    # a typo got no "did you mean" (other misspelt names do), and the list offered the
    # client, whose entrypoint runs in `polybus run`: no worker serves it
    ("sever", "has no [modules.sever]: did you mean 'server'?"),
    ("zzz", "has no [modules.zzz]: the modules it serves are server"),
])
def test_as_names_the_nearest_module_a_worker_serves(key: str, said: str) -> None:
    config = Path(__file__).parents[2] / "examples" / "sort" / "app.toml"
    with pytest.raises(UsageError) as info:
        _worker_as(config, key)
    assert str(info.value) == f"{config} {said}"
