"""Mutual TLS for connections that leave the host: ``[cluster] tls = { cert, key, ca }``.

Both sides present a certificate signed by the cluster's CA and require one from the
peer (CERT_REQUIRED both ways, TLS 1.2 or newer). The token handshake still runs inside
TLS, so a stolen certificate alone does not let anyone in, nor a stolen token alone.
One setting per process (`configure`), used by every listen/connect of `endpoints`,
so registry, workers and clients of one cluster all speak TLS or none does.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from polybus.errors import ConfigError


@dataclass(frozen=True)
class TLSConfig:
    cert: str   # this process's certificate chain (PEM)
    key: str    # its private key (PEM); its contents never appear in messages
    ca: str     # the CA that signs every member of the cluster (PEM)
    check_hostname: bool = True  # a server's certificate must name the host dialled

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._common(ctx)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._common(ctx)
        ctx.check_hostname = self.check_hostname
        return ctx

    def _common(self, ctx: ssl.SSLContext) -> None:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.verify_mode = ssl.CERT_REQUIRED
        for what, path in (("cert", self.cert), ("key", self.key), ("ca", self.ca)):
            if not Path(path).is_file():
                raise ConfigError(f"tls.{what}: no such file {path!r}")
        try:
            ctx.load_cert_chain(self.cert, self.key)
            ctx.load_verify_locations(cafile=self.ca)
        except (ssl.SSLError, OSError) as exc:
            # The reason only (e.g. "key values mismatch"), never file contents.
            raise ConfigError(f"tls: cannot load {self.cert} / {self.ca}: "
                              f"{getattr(exc, 'reason', None) or type(exc).__name__}") from None


_current: TLSConfig | None = None


def configure(config: TLSConfig | None) -> None:
    """Use ``config`` (None: plain TCP) for this process's connections from now on."""
    global _current
    if config is not None:  # fail now, on a bad file, not at the first connection
        config.server_context()
        config.client_context()
    _current = config


def configure_cluster(cluster: object) -> None:
    """`configure` from a configuration's ``[cluster]`` (its ``tls`` files, if any)."""
    files = getattr(cluster, "tls", None)
    configure(None if files is None else TLSConfig(files.cert, files.key, files.ca))


def current() -> TLSConfig | None:
    return _current


_contexts: dict[tuple[TLSConfig, bool], ssl.SSLContext] = {}


def _context(config: TLSConfig, server: bool) -> ssl.SSLContext:
    ctx = _contexts.get((config, server))
    if ctx is None:
        ctx = config.server_context() if server else config.client_context()
        _contexts[(config, server)] = ctx
    return ctx


def wrap_server(sock: socket.socket, config: TLSConfig) -> ssl.SSLSocket:
    """The TLS handshake as the accepting side (bounded by ``sock``'s timeout)."""
    return _context(config, True).wrap_socket(sock, server_side=True)


def wrap_client(sock: socket.socket, config: TLSConfig, host: str) -> ssl.SSLSocket:
    return _context(config, False).wrap_socket(sock, server_hostname=host or None)
