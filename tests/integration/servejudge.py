"""What servemix.py's runs are judged by: each response against its handler's, called
in-process (servehttp.py), or against what the docs give the draw instead; serve's
words of each hang-up and kill; its exit; what it left."""

from __future__ import annotations

import re

from . import chaosmix, servehttp
from .servemix import START_S, Draw, Ran, late, priority_reads

_FAULTS = re.compile(r"the front door failed|polybus failed calling|Traceback|"
                     r"Unhandled exception|Task exception", re.M)


def judge(d: Draw, ran: Ran, limit: float) -> str:
    """'' if the run answered every request as the handler does here (or as the docs
    say of the draw: a 503 beside overflow = "reject", a 502 of a call killed with its
    replica where the interface is not idempotent), said each hang-up and the kill, and
    stopped cleanly; else what went wrong."""
    got, problems = ran.out, []
    if got.rc is None:
        problems.append(f"still running {limit:g} s after it answered first (or "
                        f"{START_S:g} s after it started)")
    elif d.stop and "polybus serve: stopping after" not in got.stderr:
        problems.append("its stop was not said")
    elif got.rc != 143:
        problems.append(f"exit status {got.rc}, not 143 (SIGTERM)")
    reads = priority_reads(d)
    for i, req in enumerate(ran.reqs):
        answer = ran.clients.got.get(i, "no response")
        if isinstance(answer, str):
            if not d.stop:  # (a stop closes connections between requests, and the door)
                problems.append(f"{req.method} {req.target}: {answer}")
            continue
        why = servehttp.differs(req, servehttp.expected(req, reads, late(d)), answer)
        if why and not _allowed(d, req, answer, ran.killed):
            problems.append(f"{req.method} {req.target}: {why}")
    if m := _FAULTS.search(got.stderr):
        problems.append(f"serve said a fault of its own: {got.stderr[m.start():m.start() + 300]!r}")
    reject = d.option("modules.w1.define.slow.overflow") == "reject"  # (a 503 at once)
    for n, began in sorted(ran.hung.items()):
        said = f"GET /slow?s=3&n={n} -> w1.slow: abandoned by its client"
        early = servehttp.HANG_UPS[n % 3] == "early"
        timed_out = f"GET /slow?s=3&n={n} -> w1.slow: 504 " in got.stderr  # (before the
        # hang-up: the route's 0.3 s, where drawn, counts from the request's read)
        if began and not (early and reject) and not timed_out and said not in got.stderr:
            problems.append(f"the client that hung up on /slow n={n} was not said abandoned")
    if ran.killed.name and d.kill and \
            f"replica {ran.killed.name} of module '{d.kill.module}' was lost" not in got.stderr:
        problems.append(f"the loss of {ran.killed.name} was not said")
    if got.left:
        problems.append(f"left behind: {got.left}")
    if not problems:
        return ""
    kill = f" [killed: {ran.killed.name or ran.killed.why_not}]" if d.kill else ""
    return "; ".join(problems[:8]) + kill + f"\n{got.stderr[-3000:]}"


def _allowed(d: Draw, req: servehttp.Req, answer: servehttp.Got,
             killed: chaosmix.Killed) -> bool:
    """Whether ``answer``, not the handler's, is one the docs give the draw."""
    target = req.route()
    if target is None:
        return False
    module, iface = target
    d_key = f"modules.{module}.define.{iface}"
    if answer[0] == 503 and d.stop and (req.method == "HEAD" or answer[2].endswith(
            b": the server is stopping\n")):
        return answer[1].get("retry-after") == "1"  # (in flight past the grace)
    if answer[0] == 502 and d.stop == "group":  # (its workers got the SIGTERM too, and
        # stopped: a call lost with them is not run again (or, not idempotent, at all),
        # or ran on each as they went, PoisonCallError; "retry later" where how they
        # ended is not known yet, tests/unit/test_revival_ready.py)
        return True
    if answer[0] == 503:  # (the replica's queue full)
        return d.option(f"{d_key}.overflow") == "reject" and answer[1].get("retry-after") == "1"
    if answer[0] == 502 and killed.name and d.kill and d.kill.module == module:
        return d.option(f"{d_key}.idempotent") is False  # (its WorkerDiedError)
    return False


def said(d: Draw, ran: Ran | None) -> str:
    """What a run did beside its requests: its kill, its hang-ups."""
    if ran is None:
        return "refused"
    out = [f"{len(ran.reqs)} requests"]
    if ran.killed.name or ran.killed.why_not:
        out.append(f"killed {ran.killed.name} at call {ran.killed.calls}" if ran.killed.name
                   else f"no kill: {ran.killed.why_not}")
        if ran.killed.second:
            out.append(f"then {ran.killed.second}")
    if ran.hung:
        out.append(f"{sum(ran.hung.values())} of {len(ran.hung)} hang-ups mid-request")
    if d.stop:
        n = sum(1 for g in ran.clients.got.values() if not isinstance(g, str))
        out.append(f"SIGTERM to {d.stop} with {len(ran.reqs) - n} unanswered")
    return ", ".join(out)
