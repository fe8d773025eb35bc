"""polybus: run distributed client/server programs of plain Python modules, with every
performance decision in one configuration file."""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import signal
import sys
import threading
import time
import traceback
import warnings

from polybus.errors import ConfigWarning, PolybusError

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polybus", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        mod = importlib.import_module(f"polybus.cli.cmd_{name}")
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


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


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _program_threads() -> list[threading.Thread]:
    """Threads the program started that are still running (polybus's own are daemons)."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def _outlived(command: str) -> None:
    """Wait for the program's threads that outlive its entrypoint, as Python would, but
    here, where Ctrl-C and SIGTERM still end the wait: in the interpreter's own wait at
    exit a signal was swallowed, and a thread that never ends (its polybus calls fail
    once the run is over) held the process for good."""
    left = _program_threads()
    if not left:
        return
    print(f"polybus {command}: the program returned; waiting for its threads still "
          f"running ({', '.join(t.name for t in left)}); Ctrl-C or SIGTERM ends the run",
          file=sys.stderr, flush=True)
    while _program_threads():  # (a sleep, not join: a join a signal interrupts can
        time.sleep(0.05)       # leave its thread marked ended while it runs on)


def _ended(code: int, real: bool) -> int:
    """``code``, or the process ended at once with it when program threads still run:
    the interpreter would otherwise wait for them at exit, deaf to signals."""
    if real and _program_threads():
        print(f"polybus: {len(_program_threads())} thread(s) of the program were still "
              "running; they end with the process", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
    try:
        code = int(args._module.main(args) or 0)
        if argv is None:
            _outlived(args.command)
        return code
    except PolybusError as exc:
        print(f"polybus {args.command}: error: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", ()):  # (what the run found out after: runner.py)
            print(f"  {note}", file=sys.stderr)
        return 2
    except Terminated:
        print(f"polybus {args.command}: terminated", file=sys.stderr)
        return _ended(128 + signal.SIGTERM, argv is None)
    except KeyboardInterrupt:
        print(f"polybus {args.command}: interrupted", file=sys.stderr)
        return _ended(130, argv is None)
    except Exception as exc:
        # The client program's own exception: its traceback from the entrypoint's frame
        # (polybus's frames that called it say nothing one can act on). Anything else
        # is polybus's own failure: all of it, for a report.
        from polybus.runner import client_traceback

        tb = client_traceback(exc) if args.command == "run" else None
        if tb is None:
            raise
        print(f"polybus run: the client raised {type(exc).__name__}", file=sys.stderr)
        traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
        return 1
