"""Writing a small polybus program to disk, for tests of a configuration or a run.

``write_app(where, server=..., client=..., toml=...)`` writes ``server.py``,
``client.py`` and ``app.toml`` (each dedented, so they can be indented in a test) and
returns the configuration's path, ready for ``polybus.run`` or ``polybus.config.load``.
``write_one_call_app`` writes the smallest whole program (a server's ``f(x)`` returning
``x``, a client calling ``f(1)``, the binding between them) for tests of one key, and
``write_bound_app`` a server and a client of your own with ``client.N`` bound to
``server.N`` for each name.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["ONE_CALL_CLIENT", "ONE_CALL_SERVER", "waiting_client", "write_app", "write_bound_app",
           "write_one_call_app"]


def write_app(where: Path, *, server: str, client: str, toml: str) -> Path:
    """Write server.py, client.py and app.toml (dedented) into ``where``; the toml path."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "server.py").write_text(textwrap.dedent(server))
    (where / "client.py").write_text(textwrap.dedent(client))
    app = where / "app.toml"
    app.write_text(textwrap.dedent(toml))
    return app


ONE_CALL_SERVER = "def f(x):\n    return x\n"
ONE_CALL_CLIENT = "from polybus import use\n\nf = use('f')\n\n\ndef main():\n    return f(1)\n"
_ONE_CALL_TOML = """\
[modules.server]
source = "server.py"
{server}

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.f" = "server.f"
{tail}"""


def write_one_call_app(where: Path, *, server_keys: str = "", tail: str = "",
                       server: str = ONE_CALL_SERVER, client: str = ONE_CALL_CLIENT) -> Path:
    """`write_app` of the one-call program: ``server_keys`` are lines added to
    ``[modules.server]``, ``tail`` is TOML after ``[bind]`` (a ``[cluster]`` table, say),
    ``server`` replaces the server's source (it must define ``f``), ``client`` the
    client's (its entrypoint is ``main``, and it calls ``use('f')``)."""
    return write_app(where, server=server, client=client,
                     toml=_ONE_CALL_TOML.format(server=server_keys, tail=tail))


def write_bound_app(where: Path, *, server: str, client: str, names: tuple[str, ...],
                    server_keys: str = "", client_keys: str = "") -> Path:
    """`write_app` of a server module and a client module (entrypoint ``main``) with
    ``client.N`` bound to ``server.N`` for each of ``names``; ``server_keys`` and
    ``client_keys`` are lines added to their tables (``define.f = {...}``, ``use.f = ...``)."""
    binds = "\n".join(f'"client.{n}" = "server.{n}"' for n in names)
    return write_app(where, server=server, client=client, toml=(
        f'[modules.server]\nsource = "server.py"\n{server_keys}\n\n'
        f'[modules.client]\nsource = "client.py"\nentrypoint = "main"\n{client_keys}\n\n'
        f"[bind]\n{binds}\n"))


def waiting_client(name: str) -> str:
    """A client module that calls ``name(1)`` and waits for it, printing ``waiting`` once
    its main thread is inside polybus's wait (so a test's signal cannot land between
    the print and the wait); its line ``    return wait(p)`` is where it waits."""
    return f"""\
import sys
import threading
import time

from polybus import use, wait

{name} = use("{name}")


def say_when_waiting(main_thread):
    while True:
        frame = sys._current_frames().get(main_thread)
        while frame is not None and frame.f_code.co_name != "_wait":
            frame = frame.f_back
        if frame is not None:
            print("waiting", flush=True)
            return
        time.sleep(0.01)


def main():
    p = {name}(1)
    threading.Thread(target=say_when_waiting, args=(threading.get_ident(),),
                     daemon=True).start()
    return wait(p)
"""
