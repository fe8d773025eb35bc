"""Combinations of every strategy under `polybus serve` give each request the response
its handler gives in-process: a few seeded draws (tests/integration/servemix.py), each
sent over several connections at once (kept alive, closed, HTTP/1.0, pipelined), with
clients that hang up mid-request, one with a worker SIGKILLed mid-request; the
combinations the docs refuse are refused by `polybus check`. More, at random, for a
human: ``python -m tests.integration.servemix N [--kill]``."""

from __future__ import annotations

import pytest

from . import chaosmix, servehttp, servejudge, servemix
from .stratmix import Outcome

# Chosen so that together they use every kind of client connection, each kind of
# hang-up (a close and a reset mid-call, a close at once), a SIGTERM with requests in
# flight, migration paths with conditions, process pools, each callstyle, and (KILL) a
# module of one replica whose worker is killed mid-request: the request waits for the
# worker serve starts again and gets its answer. Two refusals, checked.
FIXED = [7, 41]
KILL = [23]
REFUSED = [11, 37]


def test_the_fixed_draws_cover_the_front_doors_ways() -> None:
    seen = set().union(*(servemix.features(servemix.draw(s)) for s in FIXED),
                       *(servemix.features(servemix.draw(s, kill=True)) for s in KILL))
    want = {f"conn:{k}" for k in servehttp.CONN_KINDS} | {
        "hangup", "kill:w2", "stop:serve", "pool:processes", "replication:conditions",
        "callstyle:sync", "callstyle:async", "callstyle:async-demand(N)",
        "callstyle:async-demand(auto)"}
    assert want - seen == set()
    assert servemix.draw(FIXED[0]).hangups == 3  # (n 1002 closes, 1003 resets, 1004 early)
    assert all(servemix.draw(s).refused_why for s in REFUSED)


@pytest.mark.parametrize("seed", FIXED)
def test_a_combination_answers_as_its_handlers_do(seed: int) -> None:
    d = servemix.draw(seed)
    why, ran = servemix.check(d, limit=30.0)
    assert why == "", f"seed {seed}: {' '.join(d.combo.sets())}\n{why}"
    assert ran is not None
    assert all(ran.hung.values()), ran.hung  # (hung up mid-request)
    if d.stop:  # (the signal came with requests unanswered)
        assert len([g for g in ran.clients.got.values() if not isinstance(g, str)]) < len(ran.reqs)


@pytest.mark.parametrize("seed", KILL)
def test_a_worker_killed_mid_request_changes_no_answer(seed: int) -> None:
    d = servemix.draw(seed, kill=True)
    why, ran = servemix.check(d, limit=30.0)
    assert why == "", f"seed {seed}: kill {d.kill}: {' '.join(d.combo.sets())}\n{why}"
    assert ran is not None and ran.killed.name, ran and ran.killed  # (the kill was made)


@pytest.mark.parametrize("seed", REFUSED)
def test_a_combination_the_docs_refuse_is_refused(seed: int) -> None:
    why, _ = servemix.check(servemix.draw(seed))
    assert why == ""


def test_a_wrong_answer_is_seen() -> None:
    """The judge can fail: a response whose body, status or headers differ from the
    handler's, or none, is named; a 503 is taken only beside overflow = "reject"."""
    d = servemix.draw(FIXED[0])
    reqs = servehttp.requests(FIXED[0])
    clients = servehttp.Clients([("keep-alive", list(range(len(reqs))))])
    for i, q in enumerate(reqs):
        clients.got[i] = servehttp.expected(q, servemix.priority_reads(d), servemix.late(d))
    ran = servemix.Ran(Outcome(143), clients, reqs, {}, chaosmix.Killed())
    assert servejudge.judge(d, ran, 30.0) == ""
    square = next(i for i, q in enumerate(reqs) if q.path == "/square" and q.method == "GET")
    right = servehttp.expected(reqs[square], {}, None)
    status, headers, body = right
    wrongs: list[tuple[servehttp.Got | str, str]] = [
        ((status, headers, body + b"0"), "body"), ((503, {"retry-after": "1"}, b""), "status 503"),
        ((status, {}, body), "content-type"), ("reset", "reset")]
    for wrong, said in wrongs:
        clients.got[square] = wrong
        assert said in servejudge.judge(d, ran, 30.0)
    clients.got[square] = right
    ran.hung[1002] = True  # (a hang-up serve did not say)
    assert "was not said abandoned" in servejudge.judge(d, ran, 30.0)
