"""RemoteException's message: the traceback section appears only when there is one."""
from polybus.errors import RemoteException


def test_traceback_section_when_frames_came() -> None:
    e = RemoteException("ValueError", "bad", "Traceback ...\n  line 3\n",
                        interface="f", replica="server-0")
    assert str(e).startswith("ValueError: bad (raised in f on server-0)\n--- remote traceback ---\n")


def test_no_empty_traceback_section() -> None:
    # e.g. a result the safe codec could not send: the replica has no frames to give
    e = RemoteException("TypeError", "cannot be sent", "", interface="f", replica="server-0")
    assert str(e) == "TypeError: cannot be sent (raised in f on server-0)"
    assert "remote traceback" not in str(e)
