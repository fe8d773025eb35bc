"""The handlers of the serve-mix program (tests/integration/servemix.py).

Plain functions, deterministic: each answer depends on the request alone, so every
configuration of the front door gives the same responses. Two modules of the
configuration serve this one file: ``w1`` and ``w2``. Each call is noted (and may be
held, and takes ``$MIX_PAUSE`` seconds) as the strategy-mix program's are
(tests/integration/apps/mix/server.py, ``$MIX_MARKS``): a kill is made mid-request.
"""

import hashlib
import importlib.util
import os
import time

import numpy as np


def _marks():
    """The mix program's ``_mark`` (chaosmix.py reads its marks), loaded from its file
    under a name of its own."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mix", "server.py")
    spec = importlib.util.spec_from_file_location("servemix_marks", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._mark


_mark = _marks()
_sleep = time.sleep  # (servehttp.py, calling the handlers for their answers, sleeps not)


def _n(query, key="n"):
    return int(query.get(key, "0"))


def square(query):
    """A short text answer; every 11th raises (a 500)."""
    n = _n(query)
    _mark("square", n)
    if n % 11 == 7:
        raise ValueError(f"boom square {n}")
    return str(n * n)


def echo(method, query, headers, body, subpath):
    """What the request held, as JSON."""
    _mark("echo", _n(query))
    return {"method": method, "sub": subpath, "q": query, "tag": headers.get("x-tag"),
            "n": len(body), "sum": sum(body) % 65521}


def blob(query):
    """``k`` KiB of bytes (past 64 KiB: a large answer)."""
    n = _n(query)
    _mark("blob", n)
    k = _n(query, "k")
    return (bytes(range(n % 256, 256)) + bytes(range(n % 256))) * (k * 4)


def slow(query):
    """Takes ``s`` seconds (a request a client hangs up on)."""
    _mark("slow", _n(query))
    _sleep(float(query.get("s", "0")))
    return f"slept {query.get('s', '0')}"


def ranked(query):
    """Under a priority that reads the request (``w``, the length of ``p``); a w of 4
    raises."""
    i, w = _n(query, "i"), len(query.get("p", ""))
    _mark("ranked", i)
    if w == 4:
        raise KeyError(f"boom ranked {i}")
    return [i, w, i * w]


def digest(query, body):
    """A body's digest (its bytes may be cached at the replica: ``cache``)."""
    _mark("digest", _n(query))
    return hashlib.sha256(body).hexdigest()


def shaped(query):
    """Each kind of answer a handler may give: a tuple with a status and headers, a
    (status, body), None (204), a numpy array (JSON), HTML."""
    n = _n(query)
    _mark("shaped", n)
    kind = n % 5
    if kind == 0:
        return (201 + n % 3, {"X-N": str(n)}, f"made {n}")
    if kind == 1:
        return (404, {"missing": n})
    if kind == 2:
        return None
    if kind == 3:
        return np.arange(n % 7 + 1, dtype=np.int64) * n
    return f"<html><p>{n}</p></html>"


def files(subpath):
    """Below a prefix route: the subpath."""
    _mark("files", len(subpath))
    return {"file": subpath}
