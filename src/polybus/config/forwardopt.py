"""The ``forward`` option of a used interface (``use.<iface>.forward``).

``true`` (the default): an unanswered promise of this binding passed to another call has
its value sent replica to replica; ``false``: its answers come to the client. ``"keep"``:
every call's answer of 64 KiB or more stays on its replica (client/fwdown.py) until the
program uses it (fetched then), passes it on (sent replica to replica, answered or not)
or drops its promise (let go there). It is for async calls alone: an aggregated call, a
demand backlog or a call that migration may move keeps its answers by their own paths,
and a sync call waits for its value anyway, so the check refuses ``"keep"`` with them.
"""

from __future__ import annotations

from typing import Literal

from polybus.config.model import CallStyle
from polybus.config.problems import nearest
from polybus.config.table import Table
from polybus.config.units import shown

__all__ = ["FORWARD_FORMS", "parse_forward", "refuse_keep"]

FORWARD_FORMS = "true, false or \"keep\""


def parse_forward(t: Table) -> bool | Literal["keep"] | None:
    """``t``'s ``forward``: a boolean or "keep"; None (reported) if anything else."""
    if not t.has("forward"):
        return None
    raw = t.t["forward"]
    if raw == "keep" or isinstance(raw, bool):
        return "keep" if raw == "keep" else bool(raw)
    if isinstance(raw, str):
        hint = (f"write {raw.casefold()} without quotes" if raw.casefold() in ("true", "false")
                else nearest(raw, ["keep"]) or "\"keep\" keeps large answers on their "
                "replicas; true or false (no quotes) turns forwarding on or off")
        t.p.add(f"expected {FORWARD_FORMS}, got {shown(raw)}", t.key("forward"), hint)
        return None
    t.p.wrong_type(FORWARD_FORMS, raw, t.key("forward"))
    return None


def refuse_keep(t: Table, callstyle: CallStyle, aggregated: bool, balance: str) -> None:
    """``forward = "keep"`` beside what it does not work with, said at its key."""
    why = ("an aggregated call's answers come back in its batch's answer" if aggregated
           else f"callstyle = \"{callstyle}\" holds calls at the client or waits for them"
           if callstyle.kind != "async"
           else "balance = \"steal\" may move a call to another replica" if balance == "steal"
           else "")
    if why:
        t.p.add(f"forward = \"keep\" is for plain async calls, and {why}", t.key("forward"),
                "use callstyle = \"async\" without aggregate or stealing, or forward = true")
