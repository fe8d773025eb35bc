"""Values out of range, low or high: a ConfigError at the key, with the value as written
and the range accepted, never an exception from inside the checks nor a run that fails
later. (The TOML file is read by tomllib and checked by hand, config/schema.py; no
value goes through msgspec, whose errors never reach the user here.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

SERVER = "def compare(query, entry):\n    return 0\n"
CLIENT = '''\
from polybus import use

compare = use("compare")


def main():
    return compare("a", "b")
'''
BASE = '''\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.compare = { callstyle = "async", aggregate = 8 }

[bind]
"client.compare" = "server.compare"
'''
HUGE = 10**30  # (tomllib reads any integer; TOML's own are 64-bit)
VAST = 10**400  # (past any float)
POOL = "an integer from 1 to 4096, or 'threads:N' / 'processes:N' with N from 1 to 4096"
SIZES = "a number of bytes or a string such as '64KiB', '512MiB', '1GB'"
DURATIONS = "a number of seconds or a string such as '250us', '1ms', '5s', '2m'"
REPLICATION = ("a count N >= 0 (0: no replicas, its calls made in the client), or names "
               "such as 'a,b,c' or 'a:speed=0.5', or a migration path such as "
               "'a(oc=(load>=10))#b(uc=(load==0)):[1/2]'")
AGGREGATE = ("expected a number of calls from 1 to 1,000,000 or a size such as '64KiB' (0 or '0B': off), "
             "got ")
FRAME_OVER = "a max_frame of "
FRAME_WHY = (" is more than a frame can be, '4GiB' less a byte (4,294,967,295 bytes): a "
             "frame's length is 32 bits on the wire")
FRAME_RANGE = "from '64KiB' (65,536 bytes) to '4GiB' less a byte; the default is '1GiB'"
RATIOS = "a string such as '1:2:4' or an array of numbers such as [1, 2, 4]"
HEARTBEAT_LOW = "a heartbeat of "
HEARTBEAT_WHY = (" is too short to keep: a replica silent for 3 heartbeats is taken for "
                 "dead, and a busy machine delays a process longer than that")
HEARTBEAT_RANGE = "from '10ms' to '24h'; the default is 1 s"
LISTEN_HOST = ("a host name or an IP address of this machine, or '0.0.0.0' (every "
               "interface)")
S = "modules.server"
U = "modules.client.use.compare"


def _found(tmp_path: Path, sets: dict[str, object]) -> list[tuple[str | None, str, str | None]]:
    """(key, message, hint) of every mistake, the values given as polybus.run's overrides
    (so a value is exactly the Python value, as tomllib would read it)."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(BASE)
    _, errors = validate(str(path), sets)
    return [(e.key, e.bare_message, e.hint) for e in errors]


OUT_OF_RANGE = [
    # replication was already said so, low and high (config/replication.py)
    (f"{S}.replication", -1, "the replica count must be at least 0, got -1", REPLICATION),
    (f"{S}.replication", HUGE, f"the replica count {HUGE} is more than 65536", REPLICATION),
    # aggregate: both forms (a count, a size)
    (f"{U}.aggregate", -5, AGGREGATE + "-5", None),
    # a count past any batch's frame was taken, and meant nothing
    (f"{U}.aggregate", HUGE, AGGREGATE + str(HUGE), None),
    (f"{U}.aggregate", 1_000_001, AGGREGATE + "1000001", None),
    # an operand cache of 0 bytes still kept one operand: not what it says
    (f"{S}.define.compare.cache_bytes", 0, "expected a size > 0, got 0",
     "to cache nothing, leave `cache` out of this interface"),
    (f"{S}.define.compare.cache_bytes", "0MiB", "expected a size > 0, got '0MiB'",
     "to cache nothing, leave `cache` out of this interface"),
    (f"{U}.linger", "-1ms", "a duration must not be negative, got '-1ms'", DURATIONS),
    # a pool was started whole: HUGE hung the replica making threads, processes:HUGE
    # failed with "Python int too large to convert to C int"
    (f"{S}.define.compare.pool", HUGE, f"expected a pool size, got {HUGE}", POOL),
    (f"{S}.define.compare.pool", 4097, "expected a pool size, got 4097", POOL),
    (f"{S}.define.compare.pool", "processes:100000",
     "expected a pool size, got 'processes:100000'", POOL),
    # a heartbeat past 24.8 days failed the run ("OverflowError: timeout is too large")
    ("cluster.heartbeat", 3_000_000,
     "expected a duration > 0 and at most '24h', got 3000000", None),
    ("cluster.heartbeat", "25h", "expected a duration > 0 and at most '24h', got '25h'", None),
    # a linger of 1e29 s killed the linger timer ("timestamp out of range for platform time_t")
    (f"{U}.linger", 1e29, "expected a duration of at most '24h', got 1e+29", None),
    # sizes past a float, or past 64 bits: check itself stopped on an OverflowError
    (f"{S}.define.compare.cache_bytes", "1e308TiB",
     "a size must be less than 8 EiB (2**63 bytes), got '1e308TiB'", SIZES),
    (f"{S}.define.compare.cache_bytes", VAST,
     f"a size must be less than 8 EiB (2**63 bytes), got {str(VAST)[:37]}...", SIZES),
    ("cluster.max_frame", 1 << 63,
     "a size must be less than 8 EiB (2**63 bytes), got 9223372036854775808", SIZES),
    (f"{U}.aggregate", "1e308TiB",
     "a size must be less than 8 EiB (2**63 bytes), got '1e308TiB'", SIZES),
    # durations: infinity and NaN were said to be negative; VAST stopped check
    (f"{S}.define.compare.timeout", float("inf"), "a duration must be finite, got inf",
     DURATIONS),
    (f"{S}.define.compare.timeout", VAST,
     f"a duration must be finite, got {str(VAST)[:37]}...", DURATIONS),
    (f"{U}.timeout", float("nan"), "not a duration: nan", DURATIONS),
    ("cluster.max_frame", float("inf"),
     "a size must be less than 8 EiB (2**63 bytes), got inf", SIZES),
    # a frame's length is a u32: a larger limit passed check, was sent garbled in the
    # handshake, and a message past 4 GiB failed to pack rather than being too large
    ("cluster.max_frame", "99TiB", FRAME_OVER + "'99TiB'" + FRAME_WHY, FRAME_RANGE),
    ("cluster.max_frame", 1 << 32, FRAME_OVER + "4294967296" + FRAME_WHY, FRAME_RANGE),
    # a share that is no finite number was taken: NaN sent that replica nothing, an
    # infinite share (or two whose sum overflows) skewed the split, 1e308:1e308 7 to 1
    (f"{U}.loadratio", "nan:1", "a load ratio's shares are finite numbers, got 'nan:1'",
     RATIOS),
    (f"{U}.loadratio", [1, float("inf")],
     "a load ratio's shares are finite numbers, got [1, inf]", RATIOS),
    (f"{U}.loadratio", [1e308, 1e308],
     "a load ratio's shares are finite numbers, got [1e+308, 1e+308] (their sum is not)",
     RATIOS),
    # a fraction of a byte written as a string was rounded, where a number was refused
    (f"{S}.define.compare.cache_bytes", "1.5",
     "a size in bytes must be whole, got '1.5'", SIZES),
    (f"{S}.define.compare.cache_bytes", "2.5B",
     "a size in bytes must be whole, got '2.5B'", SIZES),
    # a heartbeat of microseconds was taken: the worker never registered (1us), or every
    # call was lost with its replica taken for dead after 3 ms of silence (1ms)
    ("cluster.heartbeat", "1us", HEARTBEAT_LOW + "'1us' (1e-06 s)" + HEARTBEAT_WHY,
     HEARTBEAT_RANGE),
    ("cluster.heartbeat", 0.001, HEARTBEAT_LOW + "0.001 (0.001 s)" + HEARTBEAT_WHY,
     HEARTBEAT_RANGE),
    # a window of twenty digits was taken, and meant nothing
    (f"{U}.callstyle", f"async-demand({HUGE})",
     f"window {HUGE} in call style 'async-demand({HUGE})' is more than 1,000,000",
     "async-demand(N) with N from 1 to 1,000,000, or 'async-demand(auto)'"),
    # a listen_host that can name no interface passed check; run failed at its first
    # listen, "Name or service not known" (tcp://[127.0.0.1:5000]:0 for a port)
    ("cluster.listen_host", "127.0.0.1:5000",
     "bad listen_host '127.0.0.1:5000': a host alone, without a port (the ports are "
     "picked free)", LISTEN_HOST + "; a worker started by hand takes --listen "
     "tcp://HOST:PORT"),
    ("cluster.listen_host", "999.1.1.1",
     "bad listen_host '999.1.1.1': not an IPv4 address (four numbers from 0 to 255)",
     LISTEN_HOST),
    ("cluster.listen_host", "tcp://127.0.0.1",
     "bad listen_host 'tcp://127.0.0.1': a host alone, without a scheme", LISTEN_HOST),
    ("cluster.listen_host", "my host", "bad listen_host 'my host': no host name holds ' '",
     LISTEN_HOST),
]


def _id(key: str, value: object) -> str:
    text = repr(value)
    return f"{key.rsplit('.', 1)[-1]}={text if len(text) <= 12 else text[:9] + '...'}"


@pytest.mark.parametrize(("key", "value", "message", "hint"), OUT_OF_RANGE,
                         ids=[_id(k, v) for k, v, *_ in OUT_OF_RANGE])
def test_a_value_out_of_range_is_said_at_its_key_with_the_range(
        tmp_path: Path, key: str, value: object, message: str, hint: str | None) -> None:
    assert _found(tmp_path, {key: value}) == [(key, message, hint)]


@pytest.mark.parametrize(("key", "value"), [
    (f"{S}.define.compare.pool", 4096),
    (f"{S}.define.compare.pool", "threads:4096"),
    ("cluster.heartbeat", "24h"),
    (f"{U}.linger", 86400),
    (f"{U}.aggregate", 1_000_000),
    (f"{U}.aggregate", 0),  # (off, as no key: test_config_aggregate_size.py)
    (f"{S}.define.compare.cache_bytes", 1),
    ("cluster.max_frame", (1 << 32) - 1),  # (a frame's u32 length: wire/framing.py)
    (f"{U}.callstyle", "async-demand(1000000)"),
    ("cluster.max_frame", "64KiB"),  # (the least taken: config/cluster.py MIN_FRAME)
    (f"{S}.define.compare.timeout", 1e12),  # (a deadline: any finite one works)
    (f"{S}.define.compare.queue", HUGE),  # (a bound never reached)
    ("cluster.heartbeat", "10ms"),  # (the least taken: config/cluster.py MIN_HEARTBEAT)
    (f"{U}.loadratio", "0.5:1e300"),
    (f"{S}.define.compare.cache_bytes", "1.5KiB"),  # (whole bytes: 1536)
    (f"{S}.define.compare.cache_bytes", "1.0001KiB"),  # (rounded: a unit's fraction)
    # a listen_host that may name an interface: run listened at each ("" and "::" bind
    # every interface, as "0.0.0.0" does; 127.1 is 127.0.0.1, as inet_aton reads it)
    ("cluster.listen_host", ""),
    ("cluster.listen_host", "::"),
    ("cluster.listen_host", "::1"),
    ("cluster.listen_host", "[::1]"),
    ("cluster.listen_host", "localhost"),
    ("cluster.listen_host", "127.1"),
    ("cluster.listen_host", "node-7.example.org"),
    ("cluster.listen_host", "fe80::1%eth0"),
])
def test_the_ends_of_each_range_are_taken(tmp_path: Path, key: str, value: object) -> None:
    assert _found(tmp_path, {key: value}) == []


@pytest.mark.parametrize(("line", "key", "said"), [
    # TOML reads 1e309 as inf: the message quoted "inf", where the file says 1e309
    ("heartbeat = 1e309", "cluster.heartbeat",
     "a duration must be finite, got 1e309"),
    ("max_frame = -1e309  # a comment", "cluster.max_frame",
     "a size must not be negative, got -1e309"),
    ("heartbeat = 1.8e308", "cluster.heartbeat",
     "a duration must be finite, got 1.8e308"),
    ("heartbeat = inf", "cluster.heartbeat", "a duration must be finite, got inf"),
])
def test_a_number_toml_reads_as_inf_is_quoted_as_written(
        tmp_path: Path, line: str, key: str, said: str) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(BASE + f"\n[cluster]\n{line}\n")
    _, errors = validate(str(path))
    assert [(e.key, e.bare_message.split(" (")[0]) for e in errors] == [(key, said)]
    assert errors[0].line == len(path.read_text().splitlines())


def test_an_array_of_such_a_number_is_quoted_as_written(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(BASE.replace('use.compare = { callstyle = "async", aggregate = 8 }',
                                 'use.compare.callstyle = "async"\n'
                                 'use.compare.loadratio = [1, 1e309]'))
    _, errors = validate(str(path))
    assert [(e.key, e.bare_message) for e in errors] == [
        (f"{U}.loadratio", "a load ratio's shares are finite numbers, got [1, 1e309]")]
