"""The cluster token: made, stored and read without ever being printed."""

from __future__ import annotations

import logging
import os
import secrets
import stat
import tempfile
from pathlib import Path

from polybus.errors import UsageError

ENV = "POLYBUS_TOKEN"
log = logging.getLogger("polybus.token")
_warned: set[str] = set()  # token files said to be readable by others (once each)


def make_token() -> bytes:
    return secrets.token_hex(32).encode()


def write_token_file(token: bytes, path: Path | None = None) -> Path:
    """Write ``token`` to a file only the user can read; returns the file's path."""
    if path is None:
        fd, name = tempfile.mkstemp(prefix="polybus-token-", suffix=".txt")
        path = Path(name)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(token)
    os.chmod(path, 0o600)
    return path


def read_token(token_file: str | Path | None = None, *, required: bool = True,
               python: bool = False) -> bytes | None:
    """From ``token_file`` if given, else from $POLYBUS_TOKEN. ``python``: the caller
    is `polybus.run` (or serve) called from Python, so the error names its
    ``token_file=`` argument, not the command line's --token-file."""
    if token_file is not None:
        if "\0" in str(token_file):  # (Path raised ValueError: embedded null byte)
            raise UsageError(f"token file {str(token_file)!r} contains a NUL character, "
                             "which no file name can hold")
        try:
            data = Path(token_file).read_bytes().strip()
        except OSError as exc:
            raise UsageError(f"cannot read token file {token_file}: {exc.strerror}") from None
        if not data:
            raise UsageError(f"token file {token_file} is empty")
        _warn_if_readable(token_file)
        _warn_if_short(data, f"token file {token_file}")
        return data
    env = os.environ.get(ENV, "").strip()
    if env:
        _warn_if_short(env.encode(), f"${ENV}")
        return env.encode()
    if required:
        # (every source `cluster_token` reads: the configuration's was left out)
        given = "token_file=FILE" if python else "--token-file FILE"
        raise UsageError(f"no cluster token: set ${ENV}, pass {given}, or set "
                         "token_file = FILE in the configuration's [cluster] table (the "
                         "file `polybus registry` wrote)")
    return None


def _warn_if_readable(token_file: str | Path) -> None:
    """Said (not refused, as ssh refuses a key): a token file others can read lets
    anyone on the host join the cluster, and run code on its replicas."""
    try:
        mode = stat.S_IMODE(os.stat(token_file).st_mode)
    except OSError:
        return
    if mode & 0o077 and str(token_file) not in _warned:
        _warned.add(str(token_file))
        log.warning("polybus: warning: token file %s can be read by others (mode %o): "
                    "whoever reads it can join this cluster; `chmod 600 %s`",
                    token_file, mode, token_file)


SHORT = 16  # bytes: a token shorter than this is said to be guessable


def _warn_if_short(token: bytes, where: str) -> None:
    """Said once a source (not refused: a test's own cluster may use one): a short token
    can be guessed, and a peer that holds the token can call every served function
    (and, where a module enables pickle, run any code)."""
    if len(token) < SHORT and where not in _warned:
        _warned.add(where)
        log.warning("polybus: warning: the cluster token in %s is %d bytes: short enough "
                    "to guess, and whoever has it can join this cluster; use %d bytes or "
                    "more (polybus registry makes one of 64)", where, len(token), SHORT)


def token_source(token_file: str | Path | None,
                 config_token_file: str | Path | None, *, python: bool = False) -> str:
    """Where `cluster_token` takes the token from, for an error about it: a stale
    $POLYBUS_TOKEN beats the configuration's file, which is easy to forget. (``python``:
    as `read_token`'s.)"""
    if token_file is not None:
        return f"token_file={str(token_file)!r}" if python else f"--token-file {token_file}"
    if os.environ.get(ENV, "").strip():
        later = f", which comes before [cluster] token_file {config_token_file}"
        return f"${ENV}{later if config_token_file else ''}"
    return f"[cluster] token_file {config_token_file}"


def cluster_token(token_file: str | Path | None, config_token_file: str | Path | None,
                  *, required: bool = True, python: bool = False) -> bytes | None:
    """The cluster token, as every part reads it (run, worker, registry): the file of
    ``--token-file``, else $POLYBUS_TOKEN, else the configuration's [cluster]
    token_file; the command line before the environment before the file. (``python``:
    as `read_token`'s.)"""
    token = read_token(token_file, required=False)
    if token is None and config_token_file:
        token = read_token(config_token_file)
    if token is None and required:
        read_token(None, python=python)  # (raises the "no cluster token" error)
    return token


def check_token_apart(token_file: str | Path | None, registry: str | None, *,
                      python: bool = False) -> None:
    """A UsageError for a token file given to a run (or serve) that has no registry: it
    is the token of workers started apart, and a run without a registry starts its own,
    under a token it makes (the file was left unread, and workers started by hand served
    nothing, unsaid). (``python``: as `read_token`'s.)"""
    if token_file is None or registry:
        return
    said = f"token_file={str(token_file)!r}" if python else f"--token-file {token_file}"
    give = "registry=" if python else "--registry HOST:PORT"
    raise UsageError(f"{said} is the token of workers started apart, at a registry: give "
                     f"{give} as well (or [cluster] registry); a run without one starts "
                     "workers of its own, under a token of its own")
