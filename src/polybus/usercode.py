"""A user's module that fails to import is the user's mistake: say so in their terms.

``import_failure`` turns the exception an import raised into a ModuleImportError that names
the module's key, its file and the line, and keeps only the traceback frames of the user's
code (polybus's and importlib's frames say nothing the user can act on).

``check_imports`` is what ``polybus check`` does after the configuration is valid: each
module is imported in a child process of its own (``python -m polybus.usercode``), so its
top-level code runs once there, the way a worker would run it, and never inside the
checking process; a module whose import takes over 2 s is named while the check waits,
and one that hangs is reported after ``timeout`` seconds with the line it was running.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import xxhash

from polybus.config.model import AppConfig
from polybus.errors import ModuleImportError
from polybus.ownfiles import is_polybus_file
from polybus.usernames import import_name, shown_names, type_name
from polybus.userpackage import relative_import_hint

__all__ = ["IMPORTING", "check_imports", "import_failure", "is_polybus_frame", "shown",
           "source_digest", "stuck_at"]

def source_digest(path: str | os.PathLike[str]) -> str:
    """The name of a module source's bytes (XXH3-64), as a worker registers it
    (``Replica.source``) and a client compares it with its configuration's."""
    with open(path, "rb") as f:
        return xxhash.xxh3_64_hexdigest(f.read())


IMPORT_TIMEOUT = 60.0
SLOW_IMPORT = 2.0   # a module's check not over by then is named while it goes on
CHILD_GRACE = 10.0  # for the child's own start, beyond the import's ``timeout``
STOP_GRACE = 2.0    # for an interrupted child to say where it was
IMPORTING = "while importing "  # what a Ctrl-C's note says (`_stopped`)
_HUNG = re.compile(r"^Timeout \([0-9:.]+\)!$", re.MULTILINE)  # faulthandler's, below


def shown(path: Path | str) -> str:
    """``path`` relative to the working directory when it is below it, else absolute."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def stuck_at(dump: str, source: Path | str) -> int | None:
    """The line of ``source`` that the innermost frame of that file was running in
    ``dump`` (stacks as faulthandler prints them), or None if no frame is of that file."""
    m = re.search(rf'File "{re.escape(str(Path(source).resolve()))}", line (\d+)', dump)
    return int(m.group(1)) if m else None


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
    # (server.InputError, not its internal module's name: as a call's error says it)
    what = "".join(shown_names(exc, traceback.format_exception_only(exc))[-1:]).strip() \
        or type_name(type(exc))
    if isinstance(exc, SystemExit):
        what = f"SystemExit({exc.code!r}): the module exits when it is imported"
    # (not again after an error that says its place: "f(1) (client.py, line 4) was ...")
    at = f" at line {line}" if line is not None and f"({path.name}, line {line})" not in what \
        else ""
    message = f"module {key!r} ({shown(path)}) failed to import: {what}{at}"
    hint = relative_import_hint(exc, path, frames[-1].filename if frames else None)
    if hint:
        message += f" ({hint})"
    if detail.strip():
        message += "\n" + detail.rstrip("\n")
    return ModuleImportError(message, module=key, file=file, line=line)


def _names(app: AppConfig, key: str) -> list[str]:
    """The functions the configuration expects module ``key`` to have once imported."""
    m = app.modules[key]
    names = [m.entrypoint] if m.entrypoint else []
    names += [n for n in m.define if n not in names]
    return names


def check_imports(app: AppConfig, timeout: float = IMPORT_TIMEOUT,
                  notice: Callable[[str], None] | None = None,
                  slow: float = SLOW_IMPORT) -> list[str]:
    """One line (or a few) per module that fails to import or lacks a named function.

    ``notice`` is told, for a module whose check has not ended after ``slow`` seconds,
    which one it is waiting for (the check is otherwise silent for up to ``timeout``)."""
    problems: list[str] = []
    for key, m in app.modules.items():
        # (-P: not the working directory on sys.path, as in a worker: engines/local.py)
        cmd = [sys.executable, "-P", "-m", "polybus.usercode", str(m.source), f"{timeout:g}", key,
               "entry" if m.entrypoint else "-", *_names(app, key)]
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        ended = True
        try:
            try:
                out, err = p.communicate(timeout=slow)
            except subprocess.TimeoutExpired:
                if notice is not None:
                    notice(f"importing module {key!r} ({shown(m.source)}) is taking more "
                           f"than {slow:g} s; waiting up to {timeout:g} s for it")
                # (the child ends itself after ``timeout`` s of import, saying where it was)
                out, err = p.communicate(timeout=timeout + CHILD_GRACE)
        except subprocess.TimeoutExpired:  # (the child did not end itself: ended here)
            ended, out, err = False, "", ""
        except KeyboardInterrupt as exc:  # (Ctrl-C; SIGTERM too: cli/main.py): where it was
            exc.add_note(_stopped(key, m.source, p))
            raise
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        lines = out.strip().splitlines()
        try:
            error = json.loads(lines[-1])["error"] if lines else None
            found = bool(lines)
        except (ValueError, KeyError, TypeError):
            found = False
        hung = _HUNG.search(err)
        if not found and (hung is not None or not ended):
            line = stuck_at(err[hung.end():], m.source) if hung is not None else None
            at = f"; it was at line {line}" if line is not None else ""
            problems.append(f"module {key!r} ({shown(m.source)}): importing it did not "
                            f"finish within {timeout:g} s (does its top-level code wait or "
                            f"loop?){at}")
        elif not found:
            tail = "\n".join(err.strip().splitlines()[-5:])
            problems.append(f"module {key!r} ({shown(m.source)}): the import check ended "
                            f"with status {p.returncode} and no answer\n{tail}")
        elif error:
            problems.append(str(error))
    return problems


def _stopped(key: str, source: Path, p: subprocess.Popen[str]) -> str:
    """Where the import of module ``key`` was when a Ctrl-C stopped the check: the child
    ``p`` says its line once stopped too (by the same Ctrl-C at a terminal, else by a
    SIGINT sent here). ``IMPORTING`` starts it: the command's last line adds it."""
    line = None
    try:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=STOP_GRACE)
        line = json.loads(out.strip().splitlines()[-1]).get("stopped_at")
    except (subprocess.TimeoutExpired, ValueError, IndexError, AttributeError):
        pass  # (no answer: the module is said without its line)
    at = f"; it was at line {line}" if isinstance(line, int) else ""
    return f"{IMPORTING}module {key!r} ({shown(source)}){at}"


def _line_in(exc: BaseException, file: str) -> int | None:
    """The line of ``file`` the import was at when ``exc`` stopped it: in ``exc``'s own
    traceback, or in what it interrupted (a second SIGINT as the import's own Ctrl-C
    handler was put back raised its own, whose traceback holds no line of the module)."""
    seen: BaseException | None = exc
    while seen is not None:
        line = next((f.lineno for f in reversed(traceback.extract_tb(seen.__traceback__))
                     if f.filename == file), None)
        if line is not None:
            return line
        seen = seen.__context__
    return None


def _child(argv: list[str]) -> int:
    """Import one module and check its named functions; print {"error": ...} as JSON."""
    from polybus.client.stubs import importing, serving
    from polybus.worker.module import entry_note, load_module, not_callable

    path, timeout, key, entry_flag, *names = argv
    entry = entry_flag == "entry"  # names[0] is the module's entrypoint
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)            # what the module prints must not garble the answer
    sys.stdout = sys.stderr
    error: str | None = None
    # An import still running after ``timeout`` s: its stacks to stderr, under a line
    # "Timeout (0:01:00)!", and this process ends (from faulthandler's own thread).
    faulthandler.dump_traceback_later(float(timeout), exit=True)
    if entry:  # (what a call at import is told: as in a run, client/stubs.py)
        importing(key, names[0])
    else:
        serving(key)
    try:
        module = load_module(Path(path), import_name(key))
    except ModuleImportError as exc:
        error = str(exc)
    except KeyboardInterrupt as exc:  # (a Ctrl-C: the check stops, and says the line)
        # (once: the check, stopped by the same Ctrl-C at a terminal, sends one more if
        # this has not ended yet, which would cut the answer short)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        line = _line_in(exc, str(Path(path).resolve()))
        answer.write(json.dumps({"error": None, "stopped_at": line}) + "\n")
        answer.flush()
        return 130
    else:
        for name in names:
            what = not_callable(module, name)
            if what is not None:
                error = (f"module {key!r} ({shown(path)}): {name!r}, which the configuration "
                         f"names, is {what} once the module is imported")
                break
            fn = getattr(module, name)
            note = entry_note(fn) if entry and name == names[0] else None
            if note:  # (async def or a generator; served async ones fail per call)
                error = f"module {key!r} ({shown(path)}): {name!r} {note}"
                break
    finally:
        faulthandler.cancel_dump_traceback_later()
    answer.write(json.dumps({"error": error}) + "\n")
    answer.flush()
    return 0


if __name__ == "__main__":
    code = _child(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # threads the module started at import must not keep the check waiting
