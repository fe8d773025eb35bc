"""A replicated module whose functions change its globals is noted (config/sharedstate.py):
each replica (and each child of a process pool) keeps its own copy, and calls are not
routed by what they touch. A new user's key-value store over 2 replicas answered
``get: [0, 1, None, 3]``, and `polybus check` said "ok"."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

CLIENT = '''\
from polybus import use

put = use("put")
get = use("get")


def main(n):
    for i in range(n):
        put(i, i)
    return [get(i) for i in range(n)]
'''
TOML = '''\
[modules.kv]
source = "kv.py"
replication = {replication}
{define}

[modules.client]
source = "client.py"
entrypoint = "main"
args = [4]

[bind]
"client.put" = "kv.put"
"client.get" = "kv.get"
'''
STORE = '''\
store = {}


def put(k, v):
    store[k] = v


def get(k):
    return store.get(k)
'''


def _notes(tmp_path: Path, module: str, replication: int = 2, define: str = "") -> list[str]:
    (tmp_path / "kv.py").write_text(module)
    (tmp_path / "client.py").write_text(CLIENT)
    app = tmp_path / "app.toml"
    app.write_text(TOML.format(replication=replication, define=define))
    cfg, problems = validate(str(app), ())
    assert problems == [] and cfg is not None, problems
    return [f"{n.key}: {n.bare_message}" for n in cfg.notes if "keeps state" in n.bare_message]


def test_a_store_in_a_replicated_module_is_noted(tmp_path: Path) -> None:
    [note] = _notes(tmp_path, STORE)
    assert note.startswith("modules.kv.replication: module 'kv' (kv.py) keeps state between "
                           "calls in its global 'store', changed by put() at line 5, and "
                           "runs as 2 replicas: each keeps its own copy"), note


@pytest.mark.parametrize("module", [
    "n = 0\n\n\ndef put(k, v):\n    global n\n    n += v\n\n\ndef get(k):\n    return n\n",
    "import collections\nlog = collections.deque()\n\n\ndef put(k, v):\n    log.append(v)\n"
    "\n\ndef get(k):\n    return len(log)\n",
    "items: list = []\n\n\ndef put(k, v):\n    del items[:]\n\n\ndef get(k):\n    return 0\n",
])
def test_other_ways_of_changing_a_global_are_noted(tmp_path: Path, module: str) -> None:
    assert len(_notes(tmp_path, module)) == 1


def test_a_process_pool_is_noted_on_its_pool_key(tmp_path: Path) -> None:
    [note] = _notes(tmp_path, STORE, replication=1,
                    define='define.put = { pool = "processes:2" }\ndefine.get = {}')
    assert note.startswith("modules.kv.define.put.pool: module 'kv' (kv.py) keeps state"), note
    assert "put runs in a pool of 2 processes" in note


@pytest.mark.parametrize(("module", "replication"), [
    (STORE, 1),  # one replica: one copy
    # globals only read, or a name the function binds itself
    ("table = {1: 2}\n\n\ndef put(k, v):\n    return table.get(k)\n\n\n"
     "def get(k):\n    table = {}\n    table[k] = 1\n    return table\n", 2),
    # a parameter named as the global
    (STORE.replace("def put(k, v):\n    store[k] = v", "def put(store, v):\n    store[0] = v"),
     2),
    # a cache: each copy may differ
    ("_cache = {}\n\n\ndef put(k, v):\n    _cache[k] = v\n\n\ndef get(k):\n"
     "    return _cache.get(k)\n", 2),
])
def test_nothing_is_said_where_no_state_is_split(tmp_path: Path, module: str,
                                                 replication: int) -> None:
    assert _notes(tmp_path, module, replication) == []
