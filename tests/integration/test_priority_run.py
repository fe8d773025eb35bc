"""A priority expression over the call's arguments, as the call gave them: a parameter
the caller left out has its default, a keyword argument counts as a positional one."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.errors import PriorityError, UsageError
from polybus.testing.apps import write_app

TOML = """\
[modules.server]
source = "server.py"
define.sample = {{ priority = "{priority}" }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.sample = {{ callstyle = "async-demand(1)" }}

[bind]
"client.sample" = "server.sample"
"""
SERVER = """\
def sample(seed, n, tag=0, *, scale=1):
    return [seed, n, tag, scale]
"""
CLIENT = """\
from polybus import use, wait

sample = use("sample")


def main():
    return wait([sample(1, 2), sample(3, 4, 5), sample(6, n=7, tag=8), sample(9, 10, scale=2)])
"""


@pytest.mark.parametrize("priority", ["tag", "tag * scale + n"])
def test_priority_uses_the_defaults_of_parameters_the_call_left_out(
        tmp_path: Path, priority: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(priority=priority))
    r = polybus.run(app)
    assert r.result == [[1, 2, 0, 1], [3, 4, 5, 1], [6, 7, 8, 1], [9, 10, 0, 2]]


DECORATED = """\
import functools


def retrying(f):
    @functools.wraps(f)
    def w(*args, retries=3, **kw):
        return f(*args, **kw) + [retries]
    return w


@retrying
def sample(seed, n, tag=0):
    return [seed, n, tag]
"""
DECORATED_CLIENT = """\
from polybus import use, wait

sample = use("sample")


def main():
    return wait([sample(1, 2, retries=1), sample(3, 4, 5)])
"""


def test_a_decorated_function_takes_what_its_wrapper_takes(tmp_path: Path) -> None:
    """The wrapper takes ``retries``, which ``sample`` does not declare: the priority is
    read from the declared parameters the call gives, and the call is not refused."""
    app = write_app(tmp_path, server=DECORATED, client=DECORATED_CLIENT,
                    toml=TOML.format(priority="tag"))
    assert polybus.run(app).result == [[1, 2, 0, 1], [3, 4, 5, 3]]


FAILING_SERVER = """\
def make(x):
    return x * 0.5


def slow(t):
    return t
"""
FAILING_CLIENT = """\
from polybus import use, wait

make = use("make")
slow = use("slow")


def main(through):
    if through == "promise":
        p = slow(make(3))
        return wait(p)
    return wait([slow(0.5), slow(0.25)])
"""
FAILING_TOML = """\
[modules.srv]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
args = ["{through}"]
use.make = {{ callstyle = "async" }}
use.slow = {{ callstyle = "{style}", forward = false }}

[bind]
"client.make" = "srv.make"
"client.slow" = "srv.slow"
"""
PRIORITY_SET = 'modules.srv.define.slow.priority="len(t)"'
SAID = ("polybus run: error: interface 'slow': priority 'len(t)' "
        "(modules.srv.define.slow.priority) cannot be computed for this call: "
        "TypeError: object of type 'float' has no len()")


@pytest.mark.parametrize("style", ["sync", "async", "async-demand(1)"])
def test_a_priority_that_fails_on_the_calls_values_is_a_clear_error_at_the_call(
        tmp_path: Path, style: str) -> None:
    """Not the program's own crash (`the client raised TypeError` and polybus's frames):
    the interface, the expression, its key and the call's line, exit status 2."""
    write_app(tmp_path, server=FAILING_SERVER, client=FAILING_CLIENT,
              toml=FAILING_TOML.format(through="values", style=style))
    p = cli("run", "app.toml", "--set", PRIORITY_SET, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(SAID + "\n"), p.stderr
    assert 'the call at File "' in p.stderr and 'client.py", line 11, in main' in p.stderr
    assert "polybus/" not in p.stderr and "Traceback" not in p.stderr


def test_a_priority_failing_for_a_call_placed_later_fails_its_promise_the_same_way(
        tmp_path: Path) -> None:
    """``forward = false``: the consuming call waits at the client for its promise's
    value and its priority is computed when it is placed (client/awaiting.py); the
    promise raises the same error where it is used."""
    write_app(tmp_path, server=FAILING_SERVER, client=FAILING_CLIENT,
              toml=FAILING_TOML.format(through="promise", style="async"))
    p = cli("run", "app.toml", "--set", PRIORITY_SET, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(SAID + "\n"), p.stderr
    assert 'the call whose answer was used at File "' in p.stderr
    assert 'client.py", line 10, in main' in p.stderr
    assert "polybus/" not in p.stderr and "Traceback" not in p.stderr


def test_a_priority_error_is_a_usage_error_and_a_type_error(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=FAILING_SERVER, client=FAILING_CLIENT,
                    toml=FAILING_TOML.format(through="values", style="async"))
    with pytest.raises(PriorityError) as e:
        polybus.run(app, {"modules.srv.define.slow.priority": "t['size']"})
    assert isinstance(e.value, UsageError) and isinstance(e.value, TypeError)
    assert str(e.value).startswith(
        "interface 'slow': priority \"t['size']\" (modules.srv.define.slow.priority) "
        "cannot be computed for this call: TypeError: 'float' object is not subscriptable")
    assert e.value.call_site is not None and e.value.call_site.endswith("client.py:11")
