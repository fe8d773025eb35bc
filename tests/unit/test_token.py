"""Where the cluster token comes from: one rule for run, worker and registry."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from polybus.errors import UsageError
from polybus.token import ENV, cluster_token, read_token


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    flag, config = tmp_path / "flag", tmp_path / "config"
    flag.write_text("from-the-flag\n")
    config.write_text("from-the-config\n")
    return flag, config


def test_the_command_line_comes_first(files: tuple[Path, Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "from-the-env")
    assert cluster_token(files[0], files[1]) == b"from-the-flag"


def test_then_the_environment(files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "from-the-env")
    assert cluster_token(None, files[1]) == b"from-the-env"


def test_then_the_configurations_file(files: tuple[Path, Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert cluster_token(None, files[1]) == b"from-the-config"


def test_none_at_all_is_an_error_that_says_where_one_comes_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(UsageError) as info:
        cluster_token(None, None)
    # (each of the three sources, the configuration's too: it was left out)
    assert str(info.value) == (
        "no cluster token: set $POLYBUS_TOKEN, pass --token-file FILE, or set token_file "
        "= FILE in the configuration's [cluster] table (the file `polybus registry` wrote)")
    assert cluster_token(None, None, required=False) is None  # (registry: it makes one)


def test_a_named_file_that_cannot_be_read_is_an_error_even_with_the_environment_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "from-the-env")
    with pytest.raises(UsageError, match=r"cannot read token file .*missing"):
        cluster_token(tmp_path / "missing", None)


def test_a_token_file_others_can_read_is_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    private, shared = tmp_path / "private.txt", tmp_path / "shared.txt"
    for path, mode in ((private, 0o600), (shared, 0o644)):
        path.write_bytes(b"t" * 40)
        path.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="polybus.token"):
        assert read_token(private) == b"t" * 40
        assert caplog.messages == []
        for _ in range(2):
            assert read_token(shared) == b"t" * 40  # (still used: said, not refused)
    assert caplog.messages == [
        f"polybus: warning: token file {shared} can be read by others (mode 644): whoever "
        f"reads it can join this cluster; `chmod 600 {shared}`"]


def test_a_short_token_is_said_once_per_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """A 5-byte token was taken without a word (`polybus registry --token-file` of a
    file the user wrote): one that short can be guessed."""
    caplog.set_level(logging.WARNING, logger="polybus.token")
    short = tmp_path / "short"
    short.write_text("abcde\n")
    short.chmod(0o600)
    assert read_token(short) == b"abcde"
    assert read_token(short) == b"abcde"
    monkeypatch.setenv(ENV, "x" * 16)
    assert read_token(None) == b"x" * 16
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"polybus: warning: the cluster token in token file {short} is 5 bytes: "
                    "short enough to guess, and whoever has it can join this cluster; use "
                    "16 bytes or more (polybus registry makes one of 64)"], said
