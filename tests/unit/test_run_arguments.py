"""`polybus.run`'s arguments checked before anything starts: overrides given as one
str, a worker_output that is not a text stream, a registry run with no token (named as
Python's ``token_file=``). Validation only: no worker is started by these tests."""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.errors import ConfigError, UsageError
from polybus.runargs import echo_to, override_strings
from polybus.testing.apps import write_one_call_app


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_one_call_app(tmp_path)


def test_one_str_is_one_override_not_one_per_character(app: Path) -> None:
    # "modules.server.replication=3" was 28 errors, one per character.
    assert override_strings("modules.server.replication=3") == ("modules.server.replication=3",)
    with pytest.raises(ConfigError) as info:
        polybus.run(app, "modules.server.replicaton=3")
    assert len(getattr(info.value, "errors", [info.value])) == 1  # (the override's)
    assert "modules.server.replicaton" in str(info.value) and "replication" in str(info.value)


@pytest.mark.parametrize("overrides", [[("modules.server.replication", 3)], 3, [b"a=1"]])
def test_overrides_that_are_neither_a_mapping_nor_strings_are_one_usage_error(
        overrides: Any) -> None:
    with pytest.raises(UsageError, match=r'a mapping or a list of "KEY=VALUE" strings'):
        override_strings(overrides)


@pytest.mark.parametrize("given", ["yes", 0, 1, io.BytesIO(), object()],
                         ids=["str", "0", "1", "BytesIO", "object"])
def test_a_worker_output_that_is_not_a_text_stream_is_refused_before_the_run(
        app: Path, given: Any) -> None:
    # It was "Exception in thread polybus-worker-output" once a worker printed, then
    # an AttributeError or TypeError from the run, its result lost.
    with pytest.raises(UsageError, match="worker_output: expected True"):
        polybus.run(app, worker_output=given)


def test_text_streams_true_and_false_are_taken() -> None:
    s = io.StringIO()
    assert echo_to(s) is s and echo_to(True) is sys.stderr and echo_to(False) is None
    assert echo_to(None) is None  # (as False: what the tests of polybus pass)
    with pytest.raises(UsageError, match="binary stream"):
        echo_to(io.BytesIO())  # type: ignore[arg-type]


def test_a_missing_token_is_said_as_python_s_token_file_argument(
        app: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLYBUS_TOKEN", raising=False)
    with pytest.raises(UsageError) as info:
        polybus.run(app, registry="127.0.0.1:1", worker_output=False)
    assert "pass token_file=FILE" in str(info.value)
    assert "--token-file" not in str(info.value)


def test_timeout_from_another_thread_is_refused_as_the_docstring_says(app: Path) -> None:
    assert "works only when `run` is called from the main thread" in " ".join((polybus.runner.run.__doc__ or "").split())
    got: list[BaseException] = []

    def other() -> None:
        try:
            polybus.run(app, timeout=5)
        except BaseException as exc:
            got.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(got) == 1 and isinstance(got[0], UsageError)
    assert "main thread" in str(got[0])


def test_a_token_file_without_a_registry_is_refused_before_the_run(
        app: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A token file is the token of workers started apart, at a registry: without one,
    the run started workers of its own under a token of its own, the file unread (even
    one that does not exist), and the workers started by hand served nothing, unsaid."""
    from polybus.cli.main import main

    token = tmp_path / "cluster.token"  # (never read: none is written)
    with pytest.raises(UsageError) as info:
        polybus.run(app, token_file=str(token), worker_output=False)
    assert str(info.value).startswith(
        f"token_file={str(token)!r} is the token of workers started apart, at a registry: "
        "give registry= as well"), info.value
    for command in ("run", "serve"):
        assert main([command, str(app), "--token-file", str(token)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"polybus {command}: error: --token-file {token} is the token "
                              "of workers started apart, at a registry: give --registry "
                              "HOST:PORT as well"), err
