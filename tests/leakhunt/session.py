"""One client session of the leak driver, run as a subprocess of driver.py.

    python session.py runs  REGISTRY TOKEN_FILE TRANSPORT SEED KIND[,KIND...]
    python session.py probe REGISTRY TOKEN_FILE REPLICA       (prints JSON)
    python session.py bad   HOST:PORT TOKEN_FILE HOW           (HOW: token | frame | magic | half)

`runs` makes one `polybus.run` of app.toml per KIND (client.py), one after the other,
at the workers registered at REGISTRY, over TRANSPORT (shm or tcp); the driver lets it
end or kills it with SIGKILL mid-burst. `bad` is a peer that misbehaves: a wrong token,
a frame that is not one after a good handshake, bytes that are not polybus, or a
handshake cut off halfway.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = str(HERE / "app.toml")


def _overrides(transport: str, kind: str, seed: int) -> dict[str, object]:
    o: dict[str, object] = {"modules.client.args": [kind, 8, seed]}
    if transport == "tcp":
        o["modules.alpha.transport"] = "tcp"
        o["modules.beta.transport"] = "tcp"
    return o


def runs(registry: str, token_file: str, transport: str, seed: int, kinds: str) -> int:
    import polybus
    for i, kind in enumerate(kinds.split(",")):
        try:
            polybus.run(APP, _overrides(transport, kind, seed + i), registry=registry,
                        token_file=token_file, worker_output=False)
        except Exception as e:  # (a timeout kind raises nothing; anything else: said)
            print(f"session: {kind}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    return 0


def probe(registry: str, token_file: str, replica: str) -> int:
    import polybus
    module = replica.rsplit("-", 1)[0]
    o = {"modules.client.args": [f"probe_{module[0]}", 0, 0],
         f"modules.{module}.replication": replica}
    r = polybus.run(APP, o, registry=registry, token_file=token_file,
                    worker_output=False)
    print(json.dumps(r.result))
    return 0


def bad(where: str, token_file: str, how: str) -> int:
    host, port = where.rsplit(":", 1)
    token = Path(token_file).read_bytes().strip()
    s = socket.create_connection((host, int(port)), timeout=10)
    greeting = s.recv(40, socket.MSG_WAITALL)
    if how == "magic":
        s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        s.recv(64)
        s.close()
        return 0
    if how == "half":
        s.sendall(greeting[:20])  # then hang up before the proof is whole
        s.close()
        return 0
    nonce_s, limit_s = greeting[8:40], greeting[6:8]
    nonce_c = hashlib.sha256(str(id(s)).encode()).digest()
    limits = limit_s + b"\x00\x00"
    key = token if how != "token" else b"not-the-token"
    mac = hmac.new(key, b"c" + nonce_s + nonce_c + limits, hashlib.sha256).digest()
    s.sendall(b"PBUS" + struct.pack("<HH", 1, 0) + nonce_c + mac)
    s.recv(33, socket.MSG_WAITALL)
    if how == "frame":  # a header that is not msgpack of a message
        header = b"\xc1\xc1garbage"
        s.sendall(struct.pack("<IHHI", 8 + len(header), 0, 0, len(header)) + header)
        s.recv(4096)
    s.close()
    return 0


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "runs":
        sys.exit(runs(rest[0], rest[1], rest[2], int(rest[3]), rest[4]))
    if cmd == "probe":
        sys.exit(probe(*rest))
    sys.exit(bad(*rest))
