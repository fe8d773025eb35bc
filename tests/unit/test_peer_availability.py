"""Whether one optional peer can run is told by importing that peer's module alone: the
question about mpi4py (every mpi engine test asks it) imported Ray and Dask too, seconds
of a test process's time, for peers it never ran."""

from __future__ import annotations

import json
import subprocess
import sys

from polybus.bench.peers import OPTIONAL_PEERS, available, why_unavailable

ASK = """
import json, sys
from polybus.bench.peers import OPTIONAL_PEERS, why_unavailable
why_unavailable(sys.argv[1])
tops = {name: module.split(".")[0] for name, (module, _) in OPTIONAL_PEERS.items()}
print(json.dumps(sorted(n for n, top in tops.items() if top in sys.modules)))
"""


def test_asking_about_one_peer_imports_no_other() -> None:
    out = subprocess.run([sys.executable, "-c", ASK, "pyzmq"], capture_output=True,
                         text=True, timeout=60, check=True)
    imported = json.loads(out.stdout)
    assert set(imported) <= {"pyzmq"}, imported  # (pyzmq itself, when installed)


def test_one_peer_s_answer_is_the_one_available_gives() -> None:
    every = available()
    assert set(every) == set(OPTIONAL_PEERS)
    for name in OPTIONAL_PEERS:
        assert why_unavailable(name) == every[name]
