"""An argument the codec cannot carry: the error names the interface and the argument,
the same under every call style and transport, and the calls around it are answered.

The serving module's workers are started by hand once for each configuration of it
(transport, replicas, pickle) and used by every test run that configures it so, at their
registry (shared_workers.py): what differs between those runs is the client's side."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
"""

CLIENT = """
    from polybus import use, wait

    echo = use("echo")

    def main():
        out = []
        for args, kw in [((object(),), {}), ((1, object()), {}), ((1,), {"y": object()})]:
            good = [echo(i) for i in range(3)]  # in flight: async-demand holds the next one
            try:
                wait(echo(*args, **kw))
            except TypeError as exc:
                out.append([type(exc).__name__, str(exc)])
            out.append(wait(good))
        out.append(wait(echo(5)))
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
    use.echo = {{ callstyle = "{style}" }}

    [bind]
    "client.echo" = "server.echo"
"""

WHY = ("a value of type object cannot be sent by the safe codec (msgpack types, numpy "
       "arrays, bytes); convert it, or set modules.server.pickle = true in the "
       "configuration")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("style", ["sync", "async", "async-demand(1)"])
def test_the_error_names_the_interface_and_argument(tmp_path: Path, workers: SharedWorkers,
                                                    style: str, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style=style, transport=transport))
    assert workers.run(app).result == [
        ["UnsendableError", f"echo(...) argument 1: {WHY}"], [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 2: {WHY}"], [0, 1, 2],
        ["UnsendableError", f"echo(...) argument 'y': {WHY}"], [0, 1, 2],
        5,
    ]


PICKLING_CLIENT = """
    from polybus import use, wait

    echo = use("echo")

    def main():
        good = [echo(i) for i in range(3)]
        try:
            wait(echo(1, lambda: 0))  # pickle cannot take a lambda
        except TypeError as exc:
            why = [type(exc).__name__, str(exc)]
        return [why, wait(good), wait(echo((2, 3)))]
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", ["sync", "async", "async-demand(1)"])
def test_a_value_pickle_refuses_is_named_the_same_way(tmp_path: Path, workers: SharedWorkers,
                                                      style: str) -> None:
    """With pickle allowed, a value pickle cannot take (a lambda) fails its call alone,
    as a TypeError naming the argument, and the calls around it are answered (pickle's
    own errors, PicklingError or AttributeError, went past every send path's handling:
    the call stayed outstanding)."""
    toml = TOML.format(style=style, transport="tcp").replace(
        'replication = 1', 'replication = 1\n    pickle = true')
    app = write_app(tmp_path, server=SERVER, client=PICKLING_CLIENT, toml=toml)
    why, good, last = workers.run(app).result
    assert why[0] == "UnsendableError"
    assert why[1].startswith("echo(...) argument 2: a value of type function cannot be "
                             "pickled: "), why[1]
    assert good == [0, 1, 2] and last == [2, 3]


AS_IS_CLIENT = """
    import numpy as np
    from polybus import use, wait

    echo = use("echo")

    def main():
        out = []
        for args in [(1, 1 << 70), (np.array([object()], dtype=object),)]:
            good = [echo(i) for i in range(3)]
            try:
                wait(echo(*args))
            except TypeError as exc:
                out.append([type(exc).__name__, str(exc)])
            out.append(wait(good))
        out.append(wait(echo(5)))
        return out
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("style", ["sync", "async"])
def test_values_of_the_kinds_sent_as_they_are_are_named_too(
        tmp_path: Path, workers: SharedWorkers, style: str, transport: str, replicas: int) -> None:
    """An int beyond msgpack's 64 bits and an array of Python objects take the call
    paths that send numbers and arrays with no look at them (the sync lanes, the plain
    async call): the error still names the argument, the calls around it are answered,
    and an int too large is an UnsendableError as an object is (it was a bare
    OverflowError naming neither interface nor argument)."""
    toml = TOML.format(style=style, transport=transport).replace(
        "replication = 1", f"replication = {replicas}")
    app = write_app(tmp_path, server=SERVER, client=AS_IS_CLIENT, toml=toml)
    big, good1, obj, good2, last = workers.run(app).result
    assert big[0] == "UnsendableError"
    assert big[1].startswith("echo(...) argument 2: "), big[1]
    assert obj == ["UnsendableError", "echo(...) argument 1: a numpy array of dtype object "
                   "(Python objects, not numbers) cannot be sent by the safe codec; convert "
                   "it to a numeric dtype or a list, or set modules.server.pickle = true "
                   "in the configuration"]
    assert good1 == good2 == [0, 1, 2] and last == 5


UNPICKLING_SERVER = """
    import os

    class Box:  # defined in the served module: the client cannot import it
        def __init__(self, x):
            self.x = x

    def echo(x, y=None):
        return x

    def boxed(x):
        return Box(x)

    def pid(x):
        return os.getpid()
"""

UNPICKLING_CLIENT = """
    from polybus import use, wait

    echo = use("echo")
    boxed = use("boxed")
    pid = use("pid")

    class Mine:  # defined in the client module: no replica can import it
        pass

    def failed(call):
        try:
            wait(call())
        except Exception as exc:
            return [type(exc).__name__, str(exc)]
        return "answered"

    def main():
        out = []
        for bad in (lambda: boxed(1), lambda: echo(Mine())):
            good = [echo(i) for i in range(3)]
            out.append(failed(bad))
            out.append(wait(good))
        pids = set()
        for _ in range(40):  # both replicas still serve
            pids.update(wait([pid(i) for i in range(4)]))
        out.append(len(pids))
        return out
"""


UNPICKLING_TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    pickle = true
    transport = "{transport}"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    transport = "{transport}"
    use.echo = {{ {use} }}
    use.boxed = {{ {use} }}

    [bind]
    "client.echo" = "server.echo"
    "client.boxed" = "server.boxed"
    "client.pid" = "server.pid"
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("use", ['callstyle = "sync"', 'callstyle = "async"',
                                 'callstyle = "async-demand(2)", aggregate = 4'],
                         ids=["sync", "async", "aggregated"])
def test_a_value_the_other_side_cannot_unpickle_fails_its_call_alone(
        tmp_path: Path, workers: SharedWorkers, use: str, transport: str) -> None:
    """With pickle = true, an answer of a class only the replica has, or an argument of a
    class only the client has, broke nothing but cut the connection (a protocol error),
    so the call was run again on the next replica, and cut that too: every replica of
    the module was lost. Now that call alone fails, saying why, and both replicas serve."""
    app = write_app(tmp_path, server=UNPICKLING_SERVER, client=UNPICKLING_CLIENT,
                    toml=UNPICKLING_TOML.format(use=use, transport=transport))
    answer, good1, argument, good2, replicas = workers.run(app).result
    assert answer[0] == "RemoteError"
    assert answer[1].startswith(
        "ModuleNotFoundError: its answer could not be unpickled in the client: No module "
        "named 'polybus_user_server'; a pickled class must come from a module both sides "
        "import"), answer[1]
    assert argument[0] == "RemoteError"
    assert argument[1].startswith(
        "ModuleNotFoundError: an argument of this call could not be unpickled on the "
        "replica: No module named 'polybus_user_client'"), argument[1]
    assert good1 == good2 == [0, 1, 2] and replicas == 2


DEEP_SERVER = """
    def echo(x, y=None):
        return x

    def deep(n):
        v = []
        for _ in range(n):
            v = [v]
        return v
"""

DEEP_CLIENT = """
    from polybus import use, wait

    echo = use("echo")
    deep = use("deep")

    def failed(call):
        try:
            wait(call())
        except Exception as exc:
            return [type(exc).__name__, getattr(exc, "remote_type", None), str(exc)]
        return "answered"

    def main():
        v = []
        for _ in range(1500):
            v = [v]
        good = [echo(i) for i in range(3)]
        out = [failed(lambda: echo(1, v)), wait(good)]
        good = [echo(i) for i in range(3)]
        out += [failed(lambda: deep(1500)), wait(good), wait(echo(5))]
        return out
"""

DEEP_TOML = TOML.replace('"client.echo" = "server.echo"',
                         '"client.echo" = "server.echo"\n    "client.deep" = "server.deep"'
                         ).replace("use.echo = {{ callstyle = \"{style}\" }}",
                                   "use.echo = {{ {use} }}\n    use.deep = {{ {use} }}")
DEEP = ("a value nested too deeply: lists, tuples or dicts inside one another more than "
        "about ")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("use", ['callstyle = "sync"', 'callstyle = "async"',
                                 'callstyle = "async-demand(1)"',
                                 'callstyle = "async-demand(2)", aggregate = 4'],
                         ids=["sync", "async", "demand", "aggregated"])
def test_a_value_nested_too_deeply_fails_its_call_alone_both_ways(
        tmp_path: Path, workers: SharedWorkers, use: str, transport: str) -> None:
    """An argument 1500 lists deep was a bare RecursionError at the client, naming neither
    call nor argument: it is an UnsendableError as any value the codec cannot carry is.
    A function returning one fails that call alone, saying why, and the replica serves on."""
    app = write_app(tmp_path, server=DEEP_SERVER, client=DEEP_CLIENT,
                    toml=DEEP_TOML.format(use=use, transport=transport))
    sent, good1, returned, good2, last = workers.run(app).result
    assert sent[:2] == ["UnsendableError", None]
    assert sent[2].startswith(f"echo(...) argument 2: {DEEP}"), sent[2]
    assert returned[:2] == ["RemoteTypeError", "TypeError"]  # (a RemoteException too)
    assert returned[2].startswith(f"TypeError: the value it returned cannot be sent: {DEEP}"), \
        returned[2]
    assert good1 == good2 == [0, 1, 2] and last == 5


DEEP_ANSWER_CLIENT = """
    from polybus import use, wait

    echo = use("echo")
    deep = use("deep")

    def depth(v):
        n = 0
        while v:
            v, n = v[0], n + 1
        return n

    def down(frames, fn):  # (fn called that many frames deeper)
        return fn() if frames == 0 else down(frames - 1, fn)

    def main():
        good = [echo(i) for i in range(3)]
        out = [depth(wait(deep(500))), wait(good)]
        out.append(down(300, lambda: depth(wait(deep(900)))))
        return out + [wait(echo(5))]
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("use", ['callstyle = "sync"', 'callstyle = "async"'],
                         ids=["sync", "async"])
def test_an_answer_the_replica_could_send_is_waited_for_at_any_depth(
        tmp_path: Path, workers: SharedWorkers, use: str, transport: str) -> None:
    """A sync call's answer 500 lists deep: ``wait`` on it was a RecursionError (it
    recursed, two frames a level). One 900 deep, waited for 300 frames down the
    program's own calls: the replica sent it, the client had no room left to decode it
    and took it for a malformed message, and dropped the replica (the next call: "no
    live replica"). Both are answered, and the replica serves on."""
    app = write_app(tmp_path, server=DEEP_SERVER, client=DEEP_ANSWER_CLIENT,
                    toml=DEEP_TOML.format(use=use, transport=transport))
    assert workers.run(app).result == [500, [0, 1, 2], 900, 5]
