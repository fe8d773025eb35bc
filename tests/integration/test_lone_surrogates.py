"""A str holding a lone surrogate (what ``os.listdir`` gives for a name that is not
UTF-8, or any ``decode(errors="surrogateescape")``): msgpack's str is UTF-8, which has
no encoding for it, so it cannot be sent as a str.

As a call's argument it is an UnsendableError naming the interface and the argument,
under every call style and transport, and the calls around it are answered (it was a
bare UnicodeEncodeError from the codec, raised through polybus's own frames). In a
function's answer it fails that call alone, saying so. In the text of an exception a
function raises it is sent, written ``\\udcff``: the client gets that exception.

The serving module's workers are started by hand once for each configuration of it and
used by every run that configures it so, at their registry (shared_workers.py); the
cached operands' check starts its own (what a replica holds is its run's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

from .shared_workers import SharedWorkers


@pytest.fixture(scope="module")
def workers() -> Iterator[SharedWorkers]:
    """Workers started by hand once for each serving module the tests configure alike
    (shared_workers.py): each test's run starts none of its own."""
    with SharedWorkers() as w:
        yield w


SERVER = """
    def echo(x, y=None):
        return x

    def named(n):  # a file name that is not UTF-8, as os.listdir gives it
        return b"caf\\xe9.txt".decode("utf-8", "surrogateescape")
"""

CLIENT = """
    from polybus import use, wait

    echo = use("echo")
    named = use("named")

    def main():
        out = []
        for args, kw in [(("x\\ud800y",), {}),
                         ((1, ["a", {"k": "x\\udcffy"}]), {}),
                         ((1,), {"y": "\\udfff"}),
                         (({"k\\udc80": 1},), {})]:
            good = [echo(i) for i in range(3)]  # in flight: async-demand holds the next one
            try:
                wait(echo(*args, **kw))
            except TypeError as exc:
                out.append([type(exc).__name__, str(exc)])
            out.append(wait(good))
        try:
            wait(named(1))
        except Exception as exc:
            out.append([type(exc).__name__, exc.remote_type, exc.remote_message])
        out.append(wait(echo("caf\\xe9")))
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1
    transport = "{transport}"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    transport = "{transport}"
    use.echo = {{ {use} }}
    use.named = {{ {use} }}

    [bind]
    "client.echo" = "server.echo"
    "client.named" = "server.named"
"""


def why(code: str, at: int) -> str:
    how = ("s.encode(errors='surrogateescape'), the bytes it was decoded from (os.fsencode "
           "for a file name; the receiver's os.fsdecode gives the str back)"
           if 0xDC80 <= int(code, 16) <= 0xDCFF else "s.encode(errors='surrogatepass')")
    return (f"a str with a lone surrogate (U+{code}) at index {at} cannot be sent: a msgpack "
            f"str is UTF-8, which has no encoding for it; send bytes instead, {how}, or "
            f"replace the character")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
@pytest.mark.parametrize("use", ['callstyle = "sync"', 'callstyle = "async"',
                                 'callstyle = "async-demand(1)"',
                                 'callstyle = "async-demand(2)", aggregate = 4'],
                         ids=["sync", "async", "demand", "aggregated"])
def test_a_lone_surrogate_is_an_unsendable_error_naming_the_argument(
        tmp_path: Path, workers: SharedWorkers, use: str, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(use=use, transport=transport))
    assert workers.run(app).result == [
        ["UnsendableError", f"echo(...) argument 1: {why('D800', 1)}"], [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 2, at [1]['k']: {why('DCFF', 1)}"],
        [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 'y': {why('DFFF', 0)}"], [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 1: {why('DC80', 1)}"], [0, 1, 2],
        ["RemoteTypeError", "TypeError",  # (a RemoteException of a built-in type)
         f"the value it returned cannot be sent: {why('DCE9', 3)}"],
        "caf\xe9",
    ]


RAISING_SERVER = """
    BAD = b"bad \\xff char".decode("utf-8", "surrogateescape")  # 'bad \\udcff char'

    class Odd(Exception):
        pass

    Odd.__qualname__ = "Odd" + BAD[4]  # (a class statement cannot name it so; this can)

    def echo(x):
        return x

    def raises(n):
        raise ValueError(BAD)

    def odd(n):
        raise Odd("m")

    def chained(n):
        try:
            raise ValueError(BAD)
        except ValueError:
            raise RuntimeError("outer")
"""

RAISING_CLIENT = """
    from polybus import use, wait

    echo = use("echo")
    raises = use("raises")
    odd = use("odd")
    chained = use("chained")

    def main():
        out = []
        for f in (raises, odd, chained):
            good = [echo(i) for i in range(3)]
            try:
                wait(f(1))
            except Exception as exc:
                out.append([type(exc).__name__, exc.remote_type, exc.remote_message,
                            exc.remote_traceback.splitlines()[-1:]])
            out.append(wait(good))
        try:
            wait(echo(raises(1)))  # (async: its failure forwarded to echo's replica)
        except Exception as exc:
            out.append([type(exc).__name__, exc.remote_type, exc.remote_message])
        out.append(wait(echo(5)))
        return out
"""

RAISING_TOML = """
    [modules.server]
    source = "server.py"
    replication = {replicas}
    transport = "{transport}"
    {pool}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    transport = "{transport}"
    use.echo = {{ {use} }}
    use.raises = {{ {use} }}
    use.odd = {{ {use} }}
    use.chained = {{ {use} }}

    [bind]
    "client.echo" = "server.echo"
    "client.raises" = "server.raises"
    "client.odd" = "server.odd"
    "client.chained" = "server.chained"
"""

POOL = ('define.raises = { pool = "processes:2" }\n    define.odd = { pool = "processes:2" }'
        '\n    define.chained = {}\n    define.echo = {}')


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("use,replicas,pool", [
    ('callstyle = "sync"', 1, ""),
    ('callstyle = "async"', 2, ""),
    ('callstyle = "async-demand(2)", aggregate = 4', 1, ""),
    ('callstyle = "async"', 2, POOL),
], ids=["sync", "async", "aggregated", "processes"])
def test_an_exception_whose_text_has_a_lone_surrogate_reaches_the_client(
        tmp_path: Path, workers: SharedWorkers, use: str, replicas: int, pool: str,
        transport: str) -> None:
    """A function raising ``ValueError("bad \\udcff char")``: its failure could not be
    encoded, and the client was told "TypeError: the value it returned cannot be sent"
    (aggregated: a fault in polybus), the ValueError lost. Its type, message and
    traceback come, each lone surrogate written ``\\udcff``; and the replica serves on."""
    app = write_app(tmp_path, server=RAISING_SERVER, client=RAISING_CLIENT,
                    toml=RAISING_TOML.format(use=use, transport=transport,
                                             replicas=replicas, pool=pool))
    out = workers.run(app).result
    sync = use == 'callstyle = "sync"'
    assert out == [
        ["RemoteValueError", "ValueError", "bad \\udcff char", ["ValueError: bad \\udcff char"]],
        [0, 1, 2],
        ["RemoteException", "server.Odd\\udcff", "m", ["server.Odd\\udcff: m"]], [0, 1, 2],
        ["RemoteRuntimeError", "RuntimeError", "outer", ["RuntimeError: outer"]], [0, 1, 2],
        ["RemoteValueError", "ValueError",
         ("" if sync else "an upstream call failed: ") + "bad \\udcff char"],
        5,
    ]


CACHED_SERVER = """
    def cached(b, s):
        return [len(b), s]
"""

CACHED_CLIENT = """
    import polybus
    from polybus import use, wait

    cached = use("cached")

    def main():
        b = bytes(100_000)
        out = []
        for arg in (b, polybus.broadcast(b)):  # (a cached operand, then a broadcast one)
            try:
                wait(cached(arg, "x\\udcffy"))
            except TypeError as exc:
                out.append([type(exc).__name__, str(exc)])
            out.append(wait(cached(arg, "ok")))
        return out
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_call_naming_cached_operands_is_refused_the_same_way(tmp_path: Path,
                                                               style: str) -> None:
    """Calls with operands (`define.cache`, `broadcast`) take a path of their own."""
    app = write_app(tmp_path, server=CACHED_SERVER, client=CACHED_CLIENT, toml=f"""
        [modules.server]
        source = "server.py"
        define.cached = {{ cache = ["b"] }}

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        use.cached = {{ callstyle = "{style}" }}

        [bind]
        "client.cached" = "server.cached"
    """)
    refused = ["UnsendableError", f"cached(...) argument 2: {why('DCFF', 1)}"]
    assert polybus.run(app).result == [refused, [100_000, "ok"], refused, [100_000, "ok"]]
