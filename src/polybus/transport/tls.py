"""Mutual TLS for connections that leave the host: ``[cluster] tls = { cert, key, ca }``.

Both sides present a certificate signed by the cluster's CA and require one from the
peer (CERT_REQUIRED both ways, TLS 1.2 or newer). The token handshake still runs inside
TLS, so a stolen certificate alone does not let anyone in, nor a stolen token alone.
One setting per process (`configure`), used by every listen/connect of `endpoints`,
so registry, workers and clients of one cluster all speak TLS or none does.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from polybus.errors import ConfigError
from polybus.transport.ready import ready

if TYPE_CHECKING:
    from polybus.transport.channel import Channel


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
                raise _bad(what, f"no such file {path!r}")
        # Each file on its own, so the message names the one at fault (messages give
        # OpenSSL's reason only, never file contents).
        try:
            ctx.load_verify_locations(cafile=self.ca)
        except (ssl.SSLError, OSError) as exc:
            raise _bad("ca", f"cannot load {self.ca} as the CA's certificate (PEM): "
                             f"{_reason(exc)}") from None
        try:
            ctx.load_cert_chain(self.cert, self.key, password=_no_passphrase)
        except _Encrypted:
            raise _bad("key", f"{self.key} is encrypted with a passphrase; polybus needs the "
                              "key unencrypted (a file only its owner can read)") from None
        except (ssl.SSLError, OSError) as exc:
            reason = _reason(exc)
            if reason == "KEY_VALUES_MISMATCH":
                raise _bad("key", f"{self.key} is not the private key of the certificate "
                                  f"{self.cert} (cluster.tls.cert): key values mismatch") from None
            if not _holds_certificate(self.cert):
                raise _bad("cert", f"cannot load {self.cert} as a certificate (PEM): it holds "
                                   "none") from None
            raise _bad("key", f"cannot load {self.key} as a private key (PEM): {reason}") from None

    def verify(self, host: str | None = None,
               where: str = "where this cluster's connections go", hint: str = "") -> None:
        """Load the files as `configure` does and make a handshake between two contexts of
        this configuration in memory (no socket), as two members of the cluster would,
        the certificate checked against ``host`` when given: ConfigError naming the
        ``cluster.tls`` key and the file at fault. ``where`` says what ``host`` is, in
        the message of a certificate that does not name it; ``hint`` is added to its hint."""
        server = self.server_context()
        client = self.client_context()
        client.check_hostname = host is not None
        try:
            _handshake(server, client, host)
        except ssl.SSLError as exc:
            why = _verify_message(exc)
            if getattr(exc, "verify_code", None) in _NAME_MISMATCH:
                raise _bad("cert", f"the certificate {self.cert} does not name {host}, "
                                   f"{where}: {why}",
                           "its subjectAltName must name that host, e.g. IP:127.0.0.1 or "
                           "DNS:node1.example.org" + hint) from None
            code = getattr(exc, "verify_code", None)
            if code in _OUT_OF_DATE:  # (signed by the CA, and out of its dates)
                raise _bad("cert", f"the certificate {self.cert} {_OUT_OF_DATE[code]} ({why}): "
                                   f"{_RENEW}") from None
            raise _bad("cert", f"the certificate {self.cert} is not signed by the CA {self.ca} "
                               f"(cluster.tls.ca): {why}") from None


_NAME_MISMATCH = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
# X509_V_ERR_CERT_NOT_YET_VALID, X509_V_ERR_CERT_HAS_EXPIRED: said as such, not as a
# certificate the CA did not sign (which OpenSSL's verify failure was taken for)
_OUT_OF_DATE = {9: "is not valid yet", 10: "has expired"}
_RENEW = ("make a new one signed by the cluster CA, or check this host's clock "
          "(`openssl x509 -noout -dates -in FILE` shows its dates)")


class _Encrypted(Exception):
    pass


def _no_passphrase() -> bytes:
    raise _Encrypted  # (else OpenSSL would ask for it on the terminal)


def _bad(what: str, message: str, hint: str | None = None) -> ConfigError:
    return ConfigError(message, key=f"cluster.tls.{what}", hint=hint)


def _reason(exc: BaseException) -> str:
    """OpenSSL's reason ("KEY_VALUES_MISMATCH"), else the error's text without its
    library tag and source line ("[SSL] PEM lib (_ssl.c:3926)": "PEM lib")."""
    text = getattr(exc, "reason", None) or getattr(exc, "strerror", None)
    text = re.sub(r"^\[\w+\]\s*|\s*\(_ssl\.c:\d+\)$", "", str(text or ""))
    return text or type(exc).__name__


def _verify_message(exc: BaseException) -> str:
    """OpenSSL's sentence for a certificate it refused, without its full stop (it is
    quoted inside a sentence of polybus's: "not valid for '127.0.0.1'. (" read as two),
    else `_reason`."""
    text = getattr(exc, "verify_message", None)
    return text.rstrip().rstrip(".") if isinstance(text, str) and text.strip() else _reason(exc)


def _holds_certificate(path: str) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError):
        return False
    return True


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str | None) -> None:
    """A TLS handshake between ``client`` (dialling ``host``) and ``server`` through
    memory; SSLError (the first side's) when it fails."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(to_client, to_server, server_side=False, server_hostname=host)
    s = server.wrap_bio(to_server, to_client, server_side=True)
    done = {id(c): False, id(s): False}
    for _ in range(16):  # (a handshake takes 2-3 flights each way)
        for side in (c, s):
            if not done[id(side)]:
                try:
                    side.do_handshake()
                    done[id(side)] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done.values()):
            return
    raise ssl.SSLError("the in-memory handshake did not finish")


_current: TLSConfig | None = None


def configure(config: TLSConfig | None) -> None:
    """Use ``config`` (None: plain TCP) for this process's connections from now on."""
    global _current
    if config is not None:  # fail now, on a bad file, not at the first connection
        config.verify()
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


_NOT_TLS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
            "HTTP_REQUEST")


def refusal(exc: ssl.SSLError, config: TLSConfig, host: str) -> str:
    """Why a TLS handshake this process started (as a client, dialling ``host``) failed,
    said as what the user can change: the peer speaks no TLS, its certificate is not the
    cluster CA's or does not name the host, or it refused this process's certificate."""
    reason = _reason(exc)
    why = _verify_message(exc)
    if getattr(exc, "verify_code", None) in _NAME_MISMATCH:
        return (f"its certificate does not name {host} ({why}): its subjectAltName must "
                f"name the host dialled")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return _theirs("its", exc, config)
    if reason in _NOT_TLS:
        return (f"the peer does not speak TLS ({reason}): was it started without "
                f"[cluster] tls? (a registry takes it with --config app.toml, a worker with "
                f"--config app.toml --as KEY, not --module)")
    return _refused_mine(reason, config) or reason


def accepted_refusal(exc: ssl.SSLError, config: TLSConfig) -> str:
    """Why a TLS handshake this process accepted failed, said as `refusal` says it for
    the dialling side: the peer's certificate is not the cluster CA's (or is out of its
    dates), the peer sent none, or it refused this process's certificate. (The log said
    OpenSSL's words: ``[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca``.)"""
    reason = _reason(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return _theirs("the peer's", exc, config)
    if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return ("the peer sent no certificate (every member of a cluster with [cluster] "
                "tls presents one signed by its CA)")
    mine = _refused_mine(reason, config)
    if mine is not None:
        return mine
    if reason and reason.isupper():  # (OpenSSL's word for a record or message it refused)
        return (f"the peer sent a TLS handshake this process cannot take ({reason}): not "
                f"a member of this cluster (they speak TLS 1.2 or newer and present a "
                f"certificate of its CA), or a client of another kind")
    return reason


def _theirs(whose: str, exc: ssl.SSLError, config: TLSConfig) -> str:
    """The peer's certificate failed this side's check: out of its dates, or not signed
    by this side's CA."""
    why = _verify_message(exc)
    code = getattr(exc, "verify_code", None)
    if code in _OUT_OF_DATE:
        return (f"{whose} certificate {_OUT_OF_DATE[code]} ({why}): that host needs a new "
                f"one signed by the cluster CA, or a clock set right")
    return (f"{whose} certificate is not signed by this process's CA {config.ca} "
            f"(cluster.tls.ca): {why}")


# The alert a peer sends when it refuses this side's certificate, by OpenSSL's reason:
# what it most likely found wrong with it
_ALERTS = {
    "TLSV1_ALERT_UNKNOWN_CA": "does it trust another CA?",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": f"it has expired, or is not valid yet, by the peer's "
                                       f"clock: {_RENEW}",
    "SSLV3_ALERT_BAD_CERTIFICATE": "does it name the host the peer dialled? (its "
                                   "subjectAltName must; `polybus check --host NAME` checks)",
}


def _refused_mine(reason: str, config: TLSConfig) -> str | None:
    if "ALERT" not in reason:
        return None
    what = _ALERTS.get(reason, "does it trust another CA?")
    return (f"the peer refused this process's certificate {config.cert} "
            f"(cluster.tls.cert) ({reason}): {what}")


_HANDSHAKE_RECORD = 0x16  # the content type of a TLS record that holds a ClientHello
_PLAIN_PEER = ("a polybus process without [cluster] tls dials in plain TCP and waits for "
               "a greeting, sending nothing first; was it started without [cluster] tls? "
               "(a registry takes it with --config app.toml, a worker with --config "
               "app.toml --as KEY, not --module)")


# What this process, in TLS, sends a peer that sent nothing within the handshake's
# timeout before it closes the connection: a TLS fatal alert (handshake_failure). A
# plain polybus client, which waits for a greeting sending nothing first, reads it
# where the greeting was due and says the two differ in TLS; a connection closed with
# no byte at all is a peer stopping, or crowded. (A peer that sent bytes of its own
# that are not TLS is sent nothing: it is no polybus client.)
_ALERT = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28])


def looks_like_tls(data: bytes) -> bool:
    """Whether ``data`` begins a TLS record: a content type of 20-24 (an alert, a
    handshake...), then major version 3."""
    return len(data) >= 2 and 20 <= data[0] <= 24 and data[1] == 3


class NotTLS(OSError):
    """The peer of a connection this process accepted under TLS does not speak TLS: its
    message says what it did instead (sent nothing, closed, sent something else)."""


def client_hello(sock: socket.socket, timeout: float) -> None:
    """Wait (``sock``'s timeout) for the first bytes of a TLS ClientHello, left unread
    for the handshake: NotTLS if the peer sent none within ``timeout`` seconds (the
    setting it is said with; it is sent a TLS alert, `_ALERT`), closed the connection
    first, or sent bytes that do not begin a TLS handshake record. (OpenSSL says only
    that the handshake timed out, or a reason such as WRONG_VERSION_NUMBER.)"""
    try:
        first = sock.recv(5, socket.MSG_PEEK)
    except TimeoutError:
        try:
            sock.sendall(_ALERT)
        except OSError:  # (it closed meanwhile, or the connection was shut down: a stop)
            pass
        raise NotTLS(f"the peer does not speak TLS: it sent no TLS ClientHello within "
                     f"{timeout:g} s ({_PLAIN_PEER})") from None
    if not first:
        raise NotTLS(f"the peer does not speak TLS: it closed the connection without "
                     f"sending a TLS ClientHello ({_PLAIN_PEER})")
    if first[0] != _HANDSHAKE_RECORD:
        raise NotTLS(f"the peer does not speak TLS: it sent bytes that are not a TLS "
                     f"record ({first!r}...; another protocol, such as HTTP, or a client "
                     f"that is not polybus)")


def wrap_server(sock: socket.socket, config: TLSConfig, deadline: float) -> ssl.SSLSocket:
    """The TLS handshake as the accepting side, ended by ``deadline`` (a
    ``time.monotonic()``: the whole polybus handshake's, of which TLS's is the first part)."""
    return _handshaken(_context(config, True).wrap_socket(
        sock, server_side=True, do_handshake_on_connect=False), deadline)


def wrap_client(sock: socket.socket, config: TLSConfig, host: str,
                deadline: float) -> ssl.SSLSocket:
    """The TLS handshake as the dialling side, ended by ``deadline`` (as `wrap_server`)."""
    return _handshaken(_context(config, False).wrap_socket(
        sock, server_hostname=host or None, do_handshake_on_connect=False), deadline)


def _handshaken(ssock: ssl.SSLSocket, deadline: float) -> ssl.SSLSocket:
    """``ssock`` once its TLS handshake has ended within ``deadline``; TimeoutError
    otherwise. (Made in the wrap, it took the socket's timeout afresh, a whole timeout
    after a ClientHello that came at the end of one; and the greeting and proof after
    it as much again: a peer held a handshake for three timeouts.)"""
    left = deadline - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        ssock.settimeout(left)
        ssock.do_handshake()  # (bounded as a whole: the ssl module's own deadline)
    except TimeoutError:
        ssock.close()  # (it holds the descriptor now: closed here, as the wrap did)
        raise TimeoutError("timed out in its TLS handshake") from None
    except BaseException:
        ssock.close()
        raise
    return ssock


def fill_tls(ch: Channel, wait: bool) -> int:
    """`Channel.fill` over TLS: read whole records into ``ch``'s decoder, and on through
    what OpenSSL has decrypted already (no selector sees those bytes); the bytes read.
    ``wait``: sleep until some come (or ``ch.wake`` rings: 0), looking again each second."""
    sock = ch.sock
    total = 0
    while True:
        n = ch._read_once(0)
        if not n:
            if total or not wait:
                return total
            # (a poll: select() takes no descriptor past 1,023, and raised ValueError)
            wake = [] if ch.wake is None else [ch.wake.fileno()]
            if set(wake) & ready([sock.fileno(), *wake], [], 1.0)[0]:
                assert ch.wake is not None
                ch.wake.clear()
                return 0
            continue
        total += n
        if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
            return total  # else: decrypted bytes the selector cannot see; take them
