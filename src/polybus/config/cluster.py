"""``[cluster]``: where the parts of a program meet, and its mutual TLS files.

The TLS files are loaded as ``run`` loads them (transport/tls.py), so ``check`` finds a
key that does not match its certificate, an unreadable CA or a certificate the CA did not
sign, naming the ``cluster.tls`` key and the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, cast

from polybus.config.keys import CLUSTER_KEYS, TLS_KEYS
from polybus.config.model import ClusterSpec, TLSFiles
from polybus.config.problems import Problems
from polybus.config.schema import ENGINES, _pick, _Table
from polybus.config.units import parse_size
from polybus.errors import ConfigError

__all__ = ["parse_cluster"]


def parse_cluster(table: dict[str, Any], base_dir: Path, p: Problems) -> ClusterSpec:
    p.unknown_keys(table, CLUSTER_KEYS, "cluster")
    t = _Table(table, ("cluster",), p)
    c = ClusterSpec()
    registry = t.address("registry", "registry",
                         "expected HOST:PORT with 1 <= PORT <= 65535, e.g. '10.0.0.5:7700'")
    max_frame = t.parsed("max_frame", parse_size)
    if max_frame == 0:
        p.add("expected a frame size > 0", t.key("max_frame"))
    token_file = t.string("token_file")
    if token_file is not None:
        token_file = str((base_dir / Path(token_file).expanduser()).resolve())
    engine = None
    if table.get("engine") in ("mpi", "ray"):  # (named by the papers: said plainly)
        p.add(f"the {table['engine']} engine is not part of this version of polybus",
              t.key("engine"), "use engine = \"local\", or \"hosts\" with workers "
                               "started by `polybus worker` and [cluster] registry")
    else:
        engine = t.string("engine", ENGINES)
    spec = ClusterSpec(
        tls=_parse_tls(t, base_dir, p),
        engine=cast(Literal["local", "hosts"], _pick(engine, c.engine)),
        registry=registry,
        listen_host=_pick(t.string("listen_host"), c.listen_host),
        heartbeat=_pick(t.positive_duration("heartbeat"), c.heartbeat),
        max_frame=_pick(max_frame, c.max_frame),
        token_file=token_file,
    )
    if spec.tls is not None and not any(p.reported(f"cluster.tls.{k}") for k in TLS_KEYS):
        from polybus.transport.tls import TLSConfig  # (imports ssl: only when asked for)

        # The files loaded, and a handshake in memory, as run will make them; the
        # certificate must name the host connections go to: the registry's, else the
        # local engine's listen_host.
        host = spec.registry.rpartition(":")[0].strip("[]") if spec.registry else spec.listen_host
        try:
            TLSConfig(spec.tls.cert, spec.tls.key, spec.tls.ca).verify(host)
        except ConfigError as e:
            p.add_error(e, e.key)
    return spec


def _parse_tls(t: _Table, base_dir: Path, p: Problems) -> TLSFiles | None:
    table = t.table("tls")
    if table is None:
        return None
    p.unknown_keys(table, TLS_KEYS, "cluster", "tls")
    tt = _Table(table, ("cluster", "tls"), p)
    files = {}
    for k in TLS_KEYS:
        v = tt.string(k)
        if v is None:
            if k not in table:
                p.add(f"tls needs {k!r}", t.key("tls"), "tls = { cert = FILE, key = FILE, ca = FILE }")
            return None
        files[k] = str((base_dir / Path(v).expanduser()).resolve())
        if not Path(files[k]).is_file():  # (found by check, not when run connects)
            p.add(f"{k} file {v!r} not found (looked for {files[k]!r})", tt.key(k))
    return TLSFiles(**files)
