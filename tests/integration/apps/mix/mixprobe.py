"""What a replica of the mix program holds for its clients, written every 0.1 s to
``$MIX_PROBE.PID`` as one JSON object (tests/integration/chaosreg.py compares them
before and after a client is killed). Started by server.py when ``$MIX_PROBE`` is set,
in a ``polybus worker`` process alone (a client, or a process pool's child, holds no
runtime)."""

import json
import os
import socket
import struct
import sys
import threading
import time


def _runtime():
    """The process's WorkerRuntime, found through its threads' loops (bound methods of
    it, or wrapped in a closure): never with gc.get_objects(), whose references to a
    tuple another thread is building make CPython's tuple() of a generator fail with
    SystemError ("bad argument to internal function")."""
    for t in threading.enumerate():
        target = getattr(t, "_target", None)
        cells = [c.cell_contents for c in (getattr(target, "__closure__", None) or ())
                 if c.cell_contents is not None]
        for f in [target, *cells]:
            rt = getattr(f, "__self__", None)
            if type(rt).__name__ == "WorkerRuntime":
                return rt
    return None


def _other_end(ch):
    """Who is at the other end of channel ``ch``: ["tcp", its port] or ["unix", its pid]."""
    sock = getattr(ch, "sock", None)
    try:
        if sock.family == socket.AF_UNIX:
            cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return ["unix", struct.unpack("3i", cred)[0]]
        return ["tcp", sock.getpeername()[1]]
    except (AttributeError, OSError):
        return ["?", 0]


def sample(rt):
    """The lengths and bytes of what ``rt`` holds for its clients."""
    fw = rt.forwarding
    with fw._lock:
        arrived = (len(fw._arrived), fw._arrived.nbytes)
        held = len(fw._held)
        took = len(fw._took)
        sessions = (len(fw._sessions.nonces), len(fw._sessions.named_by))
        lapsed = set(fw._sessions.lapsed)
        unlapsed = sum(len(ks) for n, ks in fw._arrived.by_nonce.items() if n not in lapsed)
        asking = (len(fw.targets), len(fw.slots), len(fw.sized))
    with rt._lock:
        queue = len(rt._queue)
    ends = [_other_end(ch) for ch in list(rt._channels)]
    return {"channels": len(ends), "ends": ends, "peers_out": len(fw._peers), "queue": queue, "held": held, "took": took,
            "arrived": arrived[0], "arrived_bytes": arrived[1], "arrived_unlapsed": unlapsed,
            "lapsed": len(lapsed),
            "sessions": sessions[0], "named_by": sessions[1],
            "targets": asking[0], "slots": asking[1], "sized": asking[2],
            "asking": len(fw.asking), "kept": len(fw.kept), "kept_pinned": fw.kept.pinned_bytes,
            "cache": len(rt.cache), "cache_bytes": rt.cache.bytes}


def start(path):
    if "worker" not in sys.argv:  # (a client's copy of the module, or a pool's child)
        return

    def loop():
        rt = None
        for _ in range(30):  # (none in a process pool's child, nor in a client)
            time.sleep(0.1)
            if (rt := _runtime()) is not None:
                break
        else:
            return
        out = f"{path}.{os.getpid()}"
        while True:
            try:
                text = json.dumps(sample(rt))
            except Exception as exc:  # (a change of polybus's insides: said, not hidden)
                text = json.dumps({"error": repr(exc)})
            with open(out + ".tmp", "w") as f:
                f.write(text)
            os.replace(out + ".tmp", out)
            time.sleep(0.1)

    threading.Thread(target=loop, name="mixprobe", daemon=True).start()
