"""What is said when a lost replica's place is filled again: "is back" only for a worker
under the lost one's name; another worker (started by hand under a name of its own) is
said as taking the lost one's place, not as the lost process come back."""

from __future__ import annotations

import socket

from polybus.client.calls import ReplicaLink
from polybus.client.revive import back_line, follow
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec


def _link(name: str, sock: socket.socket) -> ReplicaLink:
    return ReplicaLink(name, "web", Channel(sock, Codec(), name))


def test_the_same_name_is_back_another_takes_its_place() -> None:
    a, b = socket.socketpair()
    try:
        lost = _link("web-0", a)
        again = _link("web-0", b)
        follow(again, lost)
        assert back_line(again) == "replica web-0 of module 'web' is back: dialled again"
        other = _link("web-vm-8464", b)
        follow(other, lost)
        assert back_line(other) == ("replica web-vm-8464 of module 'web' takes the place "
                                    "of lost replica web-0: dialled")
        assert back_line(lost) == "replica web-0 of module 'web' is back: dialled again"
    finally:
        a.close()
        b.close()
