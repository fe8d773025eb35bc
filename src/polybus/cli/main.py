"""polybus: run distributed client/server programs of plain Python modules, with every
performance decision in one configuration file."""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import signal
import sys
import warnings

from polybus.cli.outlive import end_now, watch
from polybus.deadline import RunTimeout
from polybus.errors import ConfigWarning, PolybusError, error_line

# One thin module per subcommand (cli/cmd_*.py), imported when used. The docstring
# above is what `polybus --help` shows.
COMMANDS = {
    "run": "run a program: start its workers, run the client, print result and summary",
    "check": "validate a configuration, then import each module in a child process "
             "(--no-import: the configuration alone); starts no workers",
    "registry": "start a registry (name server) by hand",
    "worker": "start a worker serving a module by hand",
    "bench": "run a benchmark of record",
    "sweep": "run a program under every combination of configuration values",
    "serve": "start a program's cluster behind an HTTP front door ([serve] routes)",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; with ``only``, of that command's arguments alone
    (the others listed, their modules not imported: a run's every worker starts as
    `polybus worker`, and imported all of them, bench's and sweep's too)."""
    from polybus import __version__

    parser = argparse.ArgumentParser(prog="polybus", description=__doc__)
    parser.add_argument("--version", action="version", version=f"polybus {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            mod = importlib.import_module(f"polybus.cli.cmd_{name}")
            mod.add_arguments(p)
            p.set_defaults(_module=mod, _parser=p)
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, an argument no option of its command takes said by that
    command's parser, with its usage (`polybus bench latency --reps 3` printed the
    top-level ``usage: polybus [-h] COMMAND ...``: argparse hands a subcommand's
    unknown arguments up to the top-level parser). The command named first is the only
    one whose module is imported (anything else first, as ``--help``: every one)."""
    words = sys.argv[1:] if argv is None else argv
    command = words[0] if words and words[0] in COMMANDS else None
    args, extra = build_parser(command).parse_known_args(argv)
    if extra:
        args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _format_warning(message: Warning | str, category: type[Warning], filename: str,
                    lineno: int, line: str | None = None) -> str:
    if issubclass(category, ConfigWarning):  # (no file and line of polybus's own code)
        return f"warning: {message}\n"
    return _plain_format(message, category, filename, lineno, line)


_plain_format = warnings.formatwarning


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt, so every
    `finally` on the way out runs: the engine stops its workers and removes its files.
    (`polybus worker` and `registry` set handlers of their own.)"""


def where_it_was(command: str, exc: BaseException) -> str:
    """Where `run`'s program was when a signal (or its --timeout) stopped it: its own
    line and what a wait there was for (wherestopped.py); `check`'s, the
    module whose import it was waiting for and its line (usercode.py); "" for anything
    else."""
    if command == "check":
        from polybus.usercode import IMPORTING

        return "".join(f" {n}" for n in getattr(exc, "__notes__", ()) if n.startswith(IMPORTING))
    if command != "run":
        return ""
    from polybus.wherestopped import where_stopped

    return where_stopped(exc)


def said(exc: PolybusError) -> str:
    """``exc`` as its error line says it (errors.py `error_line`)."""
    return error_line(exc)


def stopped_by(command: str, signum: int | None, more: str = "") -> int:
    """For a command that takes its stop signals itself (`worker`, `registry`), once it
    has stopped: the signal said as main() says a run's (``polybus worker: interrupted``,
    then ``more``), and the status to exit with, 128 + the signal (130 for SIGINT, 143
    for SIGTERM, 129 for SIGHUP, its terminal closed); 0, and nothing said, for none."""
    if signum is None:
        return 0
    said: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated",
                            signal.SIGHUP: "hung up (its terminal closed)"}
    what = said.get(signum, f"signal {signum}")
    end_now(command, 128 + signum, what + more, end=False)
    return 128 + signum


def started_interrupted() -> int:
    """Ctrl-C before a command began (while its modules import): the one line a later
    Ctrl-C gives, status 130, not a traceback of imports."""
    try:
        print("polybus: interrupted", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # (a closed pipe)
        pass
    return 130


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _ending(argv: list[str] | None, code: int) -> None:
    """The process ends with ``code`` (a stop signal's): another SIGINT or SIGTERM from
    now on ends it at once with the same status (one that comes as that is set up
    changes nothing). One that came as the stop's message was said, or as the
    interpreter shut down, was a KeyboardInterrupt outside main(): the process died of
    SIGINT (status -2), not 130. Not for main() called from Python."""
    if argv is not None:
        return

    def now(signum: int, frame: object) -> None:
        os._exit(code)

    while True:
        try:
            signal.signal(signal.SIGINT, now)
            signal.signal(signal.SIGTERM, now)
            return
        except KeyboardInterrupt:  # (Terminated too) one that came as they were put in
            # met the first handlers, which raised again, out of main(): a traceback and
            # status 1 (seen with two SIGTERMs at once: serve stopping a worker it had
            # started again, its restarter's thread ending and the engine signalling
            # it). Changes nothing.
            continue


def _deaf_to_stops(argv: list[str] | None) -> None:
    """Said, and about to return its status: another SIGINT or SIGTERM is ignored from
    now on. Python puts its own handlers (`_ending`'s) back to the system's default as
    the interpreter shuts down, so one that came then killed the process by SIGINT
    (status -2) after "interrupted" was said; an ignored one stays ignored. Not for
    main() called from Python."""
    if argv is not None:
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _repeated_sets(args: argparse.Namespace) -> None:
    """Warn, once, of a key given twice to --set (the last is taken, as ever); not in a
    worker or serve an engine started (``--exit-with-parent``): its --set are the
    run's, which has said it."""
    if getattr(args, "set", None) and not getattr(args, "exit_with_parent", False):
        from polybus.config.overrides import repeated

        for warning in repeated(args.set):
            print(f"polybus {args.command}: warning: {warning}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    try:  # (the subcommands' modules import here: a Ctrl-C now stops the start-up)
        args = parse(argv)
    except KeyboardInterrupt:
        return started_interrupted()
    warnings.formatwarning = _format_warning
    if argv is None:
        signal.signal(signal.SIGTERM, _terminate)
    if argv is None and hasattr(signal, "SIGUSR1"):
        # The program itself (not main() called from Python, whose process this is not
        # ours to change): `kill -USR1 PID` prints every thread's stack to stderr, what
        # a run that seems stuck is waiting on, without stopping it.
        try:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        except (OSError, ValueError):  # an stderr with no file descriptor
            pass
    # Once the command is done, only the program's threads can hold the process: a
    # signal then ends it (cli/outlive.py). Not for worker and registry (handlers of
    # their own) nor main() called from Python (not our process).
    outlive = argv is None and args.command not in ("worker", "registry")
    _repeated_sets(args)
    try:
        return int(args._module.main(args) or 0)
    except PolybusError as exc:
        print(f"polybus {args.command}: error: {said(exc)}", file=sys.stderr)
        for note in getattr(exc, "__notes__", ()):  # (what the run found out after: runner.py)
            print(f"  {note}", file=sys.stderr)
        return 2
    except RunTimeout as exc:  # (--timeout: as GNU timeout's status)
        end_now(args.command, 124, f"{exc}{where_it_was(args.command, exc)}", outlive)
        outlive = False
        return 124
    except Terminated as exc:  # (the process ends now if the program's threads run on)
        _ending(argv, 128 + signal.SIGTERM)
        end_now(args.command, 128 + signal.SIGTERM,
                "terminated" + (f" ({exc})" if str(exc) else "")  # (a sweep's how far)
                + where_it_was(args.command, exc), outlive)
        outlive = False
        _deaf_to_stops(argv)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt as exc:  # (one with words says by what: engines/mpi.py)
        _ending(argv, 130)
        end_now(args.command, 130, "interrupted" + (f" ({exc})" if str(exc) else "")
                + where_it_was(args.command, exc), outlive)
        outlive = False
        _deaf_to_stops(argv)
        return 130
    except BaseException as exc:
        # The client program's own exception: its traceback from the entrypoint's frame
        # (polybus's frames that called it say nothing one can act on), a BaseException
        # of its own too (one came out as a raw traceback through runner.py). Anything
        # else is polybus's own failure: all of it, for a report; SystemExit (sys.exit
        # in the program) ends the process as in Python.
        from polybus.wherestopped import client_traceback

        tb = client_traceback(exc) if args.command == "run" else None
        if tb is None and isinstance(exc, BrokenPipeError):  # (`polybus check | head`)
            from polybus.cli.output import stdout_gone

            if stdout_gone():  # (its reader ended first: quietly, as Python advises)
                return 1
        if tb is None or isinstance(exc, SystemExit):
            raise
        from polybus.usernames import format_exception

        print(f"polybus run: the client raised {type(exc).__name__}", file=sys.stderr)
        sys.stderr.write("".join(format_exception(exc, tb)))  # (client.InputError)
        return 1
    finally:
        if outlive:
            watch(args.command)
