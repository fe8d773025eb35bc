"""Another host, for tests that need one: a network namespace joined to this one by a
veth pair with link-local 169.254.x.y/30 addresses only. Needs root and `ip netns`
(`reason` says why not, for a skip); the namespace and the pair are deleted in a
finally, whatever the test did. Processes a test starts in the namespace are its own
to end (by PID) before it goes: a namespace lives on while a process holds it."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


def reason() -> str | None:
    """Why no namespace can be made here, or None."""
    if shutil.which("ip") is None:
        return "needs the ip command (iproute2)"
    if os.geteuid() != 0:
        return "needs root to create a network namespace"
    probe = f"pbprobe{secrets.token_hex(3)}"
    r = ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class Host:
    ns: str        # the namespace's name: `ip netns exec NS ...` runs there
    ns_if: str     # its end of the pair (down: the host cut off; up: back)
    host_ip: str   # this namespace's end
    ns_ip: str     # the other host's address

    def exec(self, *cmd: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *cmd]

    def link(self, state: str) -> None:
        ip("-n", self.ns, "link", "set", self.ns_if, state)


@contextmanager
def other_host(prefix: str) -> Iterator[Host]:
    tag = secrets.token_hex(3)
    ns, host_if, ns_if = f"{prefix}{tag}", f"pbva{tag}", f"pbvb{tag}"
    octet = 100 + secrets.randbelow(100)
    host = Host(ns, ns_if, f"169.254.{octet}.1", f"169.254.{octet}.2")
    try:
        ip("netns", "add", ns)
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        ip("link", "set", ns_if, "netns", ns)
        ip("addr", "add", f"{host.host_ip}/30", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("-n", ns, "addr", "add", f"{host.ns_ip}/30", "dev", ns_if)
        ip("-n", ns, "link", "set", ns_if, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        yield host
    finally:
        ip("netns", "del", ns, check=False)       # takes its end of the pair along
        ip("link", "del", host_if, check=False)   # in case the move never happened
