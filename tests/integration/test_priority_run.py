"""A priority expression over the call's arguments, as the call gave them: a parameter
the caller left out has its default, a keyword argument counts as a positional one."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
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
