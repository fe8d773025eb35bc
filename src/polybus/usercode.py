"""A user's module that fails to import is the user's mistake: say so in their terms.

``import_failure`` turns the exception an import raised into a ModuleImportError that names
the module's key, its file and the line, and keeps only the traceback frames of the user's
code (polybus's and importlib's frames say nothing the user can act on).

``check_imports`` is what ``polybus check`` does after the configuration is valid: each
module is imported in a child process of its own (``python -m polybus.usercode``), so its
top-level code runs once there, the way a worker would run it, and never inside the
checking process; a module that hangs on import is reported after ``timeout`` seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

from polybus.config.model import AppConfig
from polybus.errors import ModuleImportError
from polybus.ownfiles import is_polybus_file

__all__ = ["check_imports", "import_failure", "is_polybus_frame"]

IMPORT_TIMEOUT = 60.0


def shown(path: Path | str) -> str:
    """``path`` relative to the working directory when it is below it, else absolute."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def is_polybus_frame(frame: traceback.FrameSummary) -> bool:
    """A frame of polybus itself or of importlib: nothing a user can act on."""
    return is_polybus_file(frame.filename) or frame.filename.startswith("<frozen")


def _user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return [f for f in traceback.extract_tb(exc.__traceback__) if not is_polybus_frame(f)]


def import_failure(exc: BaseException, key: str, path: Path) -> ModuleImportError:
    """The ModuleImportError that says why importing module ``key`` from ``path`` failed."""
    file = str(path)
    frames = _user_frames(exc)
    line = next((f.lineno for f in reversed(frames) if f.filename == file), None)
    detail = "".join(traceback.format_list(frames))
    if isinstance(exc, SyntaxError):
        if exc.filename == file:
            line = exc.lineno
        # its own lines show the file, line and a caret under the mistake
        detail += "".join(traceback.format_exception_only(exc)[:-1])
    what = "".join(traceback.format_exception_only(exc)[-1:]).strip() or type(exc).__name__
    if isinstance(exc, SystemExit):
        what = f"SystemExit({exc.code!r}): the module exits when it is imported"
    at = f" at line {line}" if line is not None else ""
    message = f"module {key!r} ({shown(path)}) failed to import: {what}{at}"
    if detail.strip():
        message += "\n" + detail.rstrip("\n")
    return ModuleImportError(message, module=key, file=file, line=line)


def _names(app: AppConfig, key: str) -> list[str]:
    """The functions the configuration expects module ``key`` to have once imported."""
    m = app.modules[key]
    names = [m.entrypoint] if m.entrypoint else []
    names += [n for n in m.define if n not in names]
    return names


def check_imports(app: AppConfig, timeout: float = IMPORT_TIMEOUT) -> list[str]:
    """One line (or a few) per module that fails to import or lacks a named function."""
    problems: list[str] = []
    for key, m in app.modules.items():
        cmd = [sys.executable, "-m", "polybus.usercode", str(m.source), key, *_names(app, key)]
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            problems.append(f"module {key!r} ({shown(m.source)}): importing it did not finish "
                            f"within {timeout:g} s (does its top-level code wait or loop?)")
            continue
        lines = p.stdout.strip().splitlines()
        try:
            error = json.loads(lines[-1])["error"] if lines else None
            found = bool(lines)
        except (ValueError, KeyError, TypeError):
            found = False
        if not found:
            tail = "\n".join(p.stderr.strip().splitlines()[-5:])
            problems.append(f"module {key!r} ({shown(m.source)}): the import check ended "
                            f"with status {p.returncode} and no answer\n{tail}")
        elif error:
            problems.append(str(error))
    return problems


def _child(argv: list[str]) -> int:
    """Import one module and check its named functions; print {"error": ...} as JSON."""
    from polybus.worker.module import load_module

    path, key, *names = argv
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)            # what the module prints must not garble the answer
    sys.stdout = sys.stderr
    error: str | None = None
    try:
        module = load_module(Path(path), f"polybus_user_{key}")
    except ModuleImportError as exc:
        error = str(exc)
    else:
        for name in names:
            fn = getattr(module, name, None)
            if not callable(fn):
                what = "missing" if fn is None else f"a {type(fn).__name__}, not a function"
                error = (f"module {key!r} ({shown(path)}): {name!r}, which the configuration "
                         f"names, is {what} once the module is imported")
                break
    answer.write(json.dumps({"error": error}) + "\n")
    answer.flush()
    return 0


if __name__ == "__main__":
    code = _child(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # threads the module started at import must not keep the check waiting
