"""Shared memory over ``shm`` with real processes that die: replicas SIGKILLed while they
hold a client's operands, clients SIGKILLed while replicas hold theirs, clients side by
side, a client short of descriptors. Answers stay right, every segment of a dead peer is
unmapped by the survivors, and nothing is ever named in /dev/shm (segments are memfds).

A segment is recognised across processes by its inode in /proc/PID/maps."""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.config import load
from polybus.registry.client import RegistryClient
from polybus.testing.conformance import memfd_mappings

from .conftest import Harness

APP = Path(__file__).parent / "shm_app" / "app.toml"
CLIENT = APP.with_name("client.py")


def _segments(pid: int | str) -> set[str]:
    """Inodes of the polybus memfds (segments and rings) ``pid`` has mapped."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return set()
    return {ln.split()[4] for ln in lines if "polybus-shm" in ln}


def _named_shm(pids: list[int]) -> list[str]:
    """Anything of polybus in /dev/shm, or mapped from there by ``pids``."""
    out = [n for n in os.listdir("/dev/shm") if "polybus" in n]
    for pid in pids:
        try:
            out += [ln for ln in Path(f"/proc/{pid}/maps").read_text().splitlines()
                    if "/dev/shm/" in ln]
        except OSError:
            pass
    return out


def _worker(h: Harness, name: str) -> int:
    cmd = [sys.executable, "-m", "polybus", "worker", "--registry", h.registry,
           "--config", str(APP), "--as", "server", "--name", name, "--exit-with-parent",
           "--heartbeat", "0.3", "--listen", f"shm://{h.tmp / name}.sock",
           "--listen", "tcp://127.0.0.1:0"]
    return h.start(name, cmd).pid


def _cluster(h: Harness, names: list[str]) -> dict[str, int]:
    h.embedded_registry(ttl=1.0)
    pids = {n: _worker(h, n) for n in names}
    h.wait_registered(names)
    return pids


def _registered_exactly(h: Harness, names: set[str], timeout: float = 15.0) -> None:
    client = RegistryClient(h.registry, h.token, timeout=1)
    deadline = time.monotonic() + timeout
    try:
        while {r.name for r in client.resolve()} != names:
            assert time.monotonic() < deadline, "the registry did not settle"
            time.sleep(0.05)
    finally:
        client.close()


def _session(h: Harness) -> Session:
    s = Session(load(APP), h.registry, h.token)
    h.sessions.append(s)
    return s


def _rows_right(s: Session, a: np.ndarray, b: np.ndarray) -> bool:
    rows = [s.call("mul", (a[i], b), {}) for i in range(len(a))]
    return bool(np.allclose(np.vstack([np.asarray(wait(p)) for p in rows]), a @ b))


def _until(cond: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_replica_killed_holding_operands_leaves_nothing_and_a_new_one_gets_them(
        harness: Harness) -> None:
    pids = _cluster(harness, ["w0", "w1"])
    rng = np.random.default_rng(1)
    a, b = rng.random((400, 200)), rng.random((200, 200))  # B: 320 KB, one shared segment
    s = _session(harness)
    rows = [s.call("mul", (a[i], b), {}) for i in range(400)]
    wait(rows[20])
    mine = _segments("self")
    assert _segments(pids["w0"]) & mine  # w0 maps the client's segments (B among them)
    harness.kill("w0")  # mid-run, holding B and calls
    assert np.allclose(np.vstack([np.asarray(wait(p)) for p in rows]), a @ b)
    del rows
    # A replacement (nothing restarts a dead worker; a new session finds the new one).
    pids["w2"] = _worker(harness, "w2")
    _registered_exactly(harness, {"w1", "w2"})
    s2 = _session(harness)
    assert _rows_right(s2, a, b)  # w2 gets B afresh
    other = rng.random((200, 200))
    assert _rows_right(s2, a[:50], other) and _rows_right(s, a[:50], other)
    assert _segments(pids["w2"]) & _segments("self")
    for sess in (s, s2):
        sess.close()
    harness.sessions.clear()
    gc.collect()
    assert memfd_mappings() == 0  # the client's segments are all closed
    # ... and unmapped by the survivors once their connections closed
    assert _until(lambda: not (_segments(pids["w1"]) | _segments(pids["w2"])) & mine)
    assert not _named_shm(list(pids.values()))


def test_a_client_killed_holding_segments_is_forgotten_and_others_are_served(
        harness: Harness) -> None:
    pids = _cluster(harness, ["w0", "w1"])
    doomed = harness.start("doomed", [sys.executable, str(CLIENT), "doomed", harness.registry])
    assert doomed.stdout is not None and doomed.stdout.readline().strip() == b"go"
    theirs = _segments(doomed.pid)
    assert all(_segments(pids[n]) & theirs for n in pids)  # both replicas map its segments
    s = _session(harness)
    rng = np.random.default_rng(2)
    a, b = rng.random((16, 200)), rng.random((200, 200))
    assert _rows_right(s, a, b)
    harness.kill("doomed")  # mid-stream: calls, B and arrays held at both replicas

    def forgotten() -> bool:
        assert _rows_right(s, a, b)  # the other client is served meanwhile
        x = rng.random(40_000)
        assert np.array_equal(np.asarray(wait(s.call("echo", (x,), {}))), x)
        return not any(_segments(p) & theirs for p in pids.values())

    assert _until(forgotten), {n: _segments(p) & theirs for n, p in pids.items()}
    assert not _named_shm(list(pids.values()))


def test_clients_side_by_side_with_operands_of_one_size_get_their_own_answers(
        harness: Harness) -> None:
    pids = _cluster(harness, ["w0", "w1"])
    clients = [harness.start(f"c{k}", [sys.executable, str(CLIENT), "check",
                                        harness.registry, str(k)]) for k in (1, 2, 3)]
    for k, p in enumerate(clients):
        out, _ = p.communicate(timeout=100)
        assert out.strip().endswith(b"wrong 0"), (out, harness.stderr(f"c{k + 1}"))
    assert not _named_shm(list(pids.values()))


def test_a_client_short_of_descriptors_gets_every_answer_of_a_burst(harness: Harness) -> None:
    # 600 large calls at once with a limit of 256 descriptors: before segments were
    # bounded per connection, each in-flight array held one (two descriptors), and the
    # client died of EMFILE after ~120.
    _cluster(harness, ["w0", "w1"])
    p = harness.start("burst", [sys.executable, str(CLIENT), "burst", harness.registry])
    out, _ = p.communicate(timeout=100)
    assert p.returncode == 0 and out.strip().endswith(b"wrong 0"), harness.stderr("burst")


def test_arrays_held_by_user_code_never_change_while_memory_is_reused(
        harness: Harness) -> None:
    # Sizes: copied out of the ring (100 KB), a frame of its own (200 KB), by segment
    # (300 KB, 2 MB). The replica keeps what it received; the client keeps answers;
    # many calls of the same sizes follow, which reuse segments and frame memory.
    _cluster(harness, ["w0"])
    s = _session(harness)
    sizes = [100_000, 200_000, 300_000, 2_000_000]
    sent = {n: np.arange(n // 8, dtype=np.float64) + n for n in sizes}
    held = []
    for n in sizes:
        assert s.call("keep", (n, sent[n]), {}) == sent[n].sum()
        held.append((n, np.asarray(wait(s.call("echo", (sent[n] * 2,), {})))))
    for i in range(30):
        for n in sizes:
            x = np.full(n // 8, float(i))
            assert np.array_equal(np.asarray(wait(s.call("echo", (x,), {}))), x)
            assert s.call("keep", (-n, x), {}) == x.sum()  # the slot others reuse
    for n in sizes:
        assert np.array_equal(np.asarray(s.call("kept", (n,), {})), sent[n])
    assert all(np.array_equal(a, sent[n] * 2) for n, a in held)


def test_a_stranger_on_the_shm_socket_never_gets_a_descriptor(harness: Harness) -> None:
    import array
    import socket

    from polybus.wire import handshake

    _cluster(harness, ["w0"])
    path = str(harness.tmp / "w0.sock")

    def descriptors(proof: object) -> list[int]:
        """Connect, answer the challenge with ``proof(hello)``, read until the worker
        hangs up or 1 s passes; the descriptors that came (closed again here)."""
        fds: list[int] = []
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(1.0)
            sock.connect(path)
            hello = b""
            while len(hello) < handshake.HELLO_SIZE:
                hello += sock.recv(handshake.HELLO_SIZE - len(hello))
            sock.sendall(proof(hello))  # type: ignore[operator]
            try:
                while True:
                    data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(64 * 4))
                    for level, kind, raw in anc:
                        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                            fds += array.array("i", raw[:len(raw) - len(raw) % 4])
                    if not data:
                        break
            except TimeoutError:
                pass
        for fd in fds:
            os.close(fd)
        return fds

    assert descriptors(lambda h: bytes(handshake.PROOF_SIZE)) == []  # wrong proof
    stranger = handshake.ClientHandshake(b"another cluster's token, 32 bytes")
    assert descriptors(stranger.proof) == []
    # The control: the token holder gets the worker's ring (its first descriptor).
    assert len(descriptors(handshake.ClientHandshake(harness.token).proof)) == 1
