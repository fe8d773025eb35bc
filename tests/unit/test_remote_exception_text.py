"""RemoteException's message: the traceback section appears only when there is one."""
from polybus.errors import UPSTREAM_FAILED, RemoteException


def test_traceback_section_when_frames_came() -> None:
    e = RemoteException("ValueError", "bad", "Traceback ...\n  line 3\n",
                        interface="f", replica="server-0")
    assert str(e).startswith("ValueError: bad (raised in f on server-0)\n--- remote traceback ---\n")


def test_no_empty_traceback_section() -> None:
    # e.g. a result the safe codec could not send: the replica has no frames to give
    e = RemoteException("TypeError", "cannot be sent", "", interface="f", replica="server-0")
    assert str(e) == "TypeError: cannot be sent (from f on server-0)"  # (not "raised")
    assert "remote traceback" not in str(e)


def test_every_part_of_where_may_be_missing() -> None:
    assert str(RemoteException("E", "m", "tb\n")) == "E: m (raised)\n--- remote traceback ---\ntb\n"
    assert str(RemoteException("E", "m", "", replica="r-0")) == "E: m (on r-0)"
    assert str(RemoteException("E", "m", "")) == "E: m (remote)"


def test_an_upstream_failure_names_the_call_it_came_from() -> None:
    # a forwarded value that failed: the consumer's replica answers, the frames are the
    # producer's, and the message says so rather than "raised in double"
    msg = UPSTREAM_FAILED + "bad n"
    e = RemoteException("ValueError", msg, "tb\n", interface="double", replica="s-1",
                        origin="make on s-0")
    assert str(e).splitlines()[0] == (
        "ValueError: an upstream call failed: bad n "
        "(raised in make on s-0, upstream of double on s-1)")
    e = RemoteException("ValueError", msg, "tb\n", interface="double", replica="s-1")
    assert str(e).splitlines()[0].endswith("(raised upstream of double on s-1)")
    e = RemoteException("WorkerDiedError", msg, "", interface="double", replica="s-1",
                        origin="make")
    assert str(e) == ("WorkerDiedError: an upstream call failed: bad n "
                      "(failed in make, upstream of double on s-1)")
