"""Responses: a handler's return value -> (status, headers, body), and those -> bytes.

`to_response` runs at the replica, where the handler's value still has its Python type
(a tuple would arrive at the front door as a list); what travels back is always
``[status, [[name, value], ...], body bytes]``. Pure; no sockets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from polybus.plural import plural, with_article

__all__ = ["HTTP_SUFFIX", "REQUEST_FIELDS", "Response", "error_response", "http_form", "serialize",
           "to_response"]

#: What a handler may take, by parameter name (it takes only the ones it names).
REQUEST_FIELDS = ("method", "path", "query", "headers", "body", "subpath")

Response = tuple[int, list[tuple[str, str]], bytes]

_TEXT = "text/plain; charset=utf-8"
_HTML = "text/html; charset=utf-8"
_JSON = "application/json"
_JSONABLE = (dict, list, int, float, bool)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a header name (RFC 9110 token)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _body(value: Any, who: str) -> tuple[bytes, str | None]:
    """A body and the content type it implies (None: no body, no type); ``who`` names
    the handler in a mistake's message."""
    if value is None:
        return b"", None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value), "application/octet-stream"
    if isinstance(value, str):
        head = value.lstrip()[:15].lower()
        html = head.startswith("<!doctype html") or head.startswith("<html")
        return value.encode("utf-8"), _HTML if html else _TEXT
    if isinstance(value, _JSONABLE) or hasattr(value, "tolist"):
        plain = value.tolist() if hasattr(value, "tolist") else value
        try:  # strict: NaN and Infinity are not JSON, and no JSON parser takes them
            return json.dumps(plain, separators=(",", ":"), allow_nan=False,
                              default=_listed).encode(), _JSON
        except ValueError as e:
            if not str(e).startswith("Out of range float"):
                raise
            raise ValueError(f"{who} returned a value that is not valid JSON: it holds a float "
                             "NaN or infinity, which JSON has no form for; return None (null) "
                             "or a string in its place") from None
        except TypeError:
            where, kind = _not_json(plain)
            if not kind:
                raise
            raise TypeError(f"{who} returned a value that is not valid JSON: {where} is "
                            f"{with_article(kind)}, which JSON has no form for; convert it "
                            "first (str(...), .isoformat(), list(...), a dict with str keys)"
                            ) from None
    kind = type(value).__qualname__
    raise TypeError(f"{who} returned {with_article(kind)}, which "
                    "is not a response: return str, bytes, a dict/list (JSON), None, or "
                    "(status, headers, body)")


def _listed(value: Any) -> Any:
    """A numpy array or scalar inside a JSON answer, as the list or number it holds (as
    an array alone is sent); anything else is not JSON."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(type(value).__qualname__)


def _not_json(value: Any, where: str = "") -> tuple[str, str]:
    """Where in ``value`` (``['t'][0]``) the first item JSON has no form for is, and its
    type; called once json.dumps has refused it."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str | int | float | bool) and key is not None:
                return f"a key of the dict at {where or 'the top'}", type(key).__qualname__
            found = _not_json(item, f"{where}[{key!r}]")
            if found[1]:
                return found
        return where, ""
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _not_json(item, f"{where}[{i}]")
            if found[1]:
                return found
        return where, ""
    if value is None or isinstance(value, str | int | float | bool):
        return where, ""
    if callable(getattr(value, "tolist", None)):
        return _not_json(value.tolist(), where)
    return (f"its item {where}" if where else "it"), type(value).__qualname__


def _headers(raw: Any, who: str) -> list[tuple[str, str]]:
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        items = [tuple(x) for x in raw]
    else:
        raise TypeError(f"{who} returned response headers that are not a dict or a list "
                        "of (name, value) pairs")
    out = []
    for item in items:
        if len(item) != 2:
            raise TypeError(f"{who} returned a response header that is not a (name, value) "
                            "pair")
        name, value = str(item[0]), str(item[1])
        if _CONTROL.search(value):  # (RFC 9110 5.5: VCHAR, obs-text, SP and HTAB only)
            raise ValueError(f"{who} returned a response header {name!r} with a forbidden "
                             "character (CR, LF, NUL or another control character but "
                             "HTAB)")
        if not _TOKEN.fullmatch(name):  # (sent as it was, "Set-Cookie: a=b; X" set a cookie)
            raise ValueError(f"{who} returned a response header {name!r} whose name is not "
                             "an HTTP token (letters, digits and !#$%&'*+-.^_`|~; no space, "
                             "colon or control character)")
        if not value.isascii():  # (the name is: a token)
            try:
                value.encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"{who} returned a response header {name!r} that HTTP/1.1 "
                                 "cannot carry (a name is ASCII, a value Latin-1): encode "
                                 "other text first (e.g. urllib.parse.quote)") from None
        out.append((name, value))
    return out


def to_response(value: Any, who: str = "a handler") -> Response:
    """The response a handler's return value stands for (``who``: the handler, for
    messages).

    str -> 200 text/plain (text/html when it begins with ``<!doctype html`` or
    ``<html``); bytes -> 200 application/octet-stream; dict, list, numbers -> 200 JSON
    (strict: a float NaN or infinity in it is a ValueError, so a 500); None -> 204; ``(status, body)`` or ``(status, headers, body)`` for full control
    (headers a dict or pairs; a Content-Type given there wins).
    """
    status = 200
    headers: list[tuple[str, str]] = []
    if isinstance(value, tuple):
        if len(value) == 2:
            status, value = value
        elif len(value) == 3:
            status, raw, value = value
            headers = _headers(raw, who)
        else:
            raise TypeError(f"{who} returned a tuple of {plural(len(value), 'item')}: a "
                            "response tuple is (status, body) or (status, headers, body)")
        # (a 1xx is an interim response: sent as the answer, the client waited on for one)
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise ValueError(f"{who} returned a bad response status {status!r} (an integer "
                             "from 200 to 599)")
    elif value is None:
        status = 204
    body, kind = _body(value, who)
    if kind is not None and not any(n.lower() == "content-type" for n, _ in headers):
        headers.append(("Content-Type", kind))
    return status, headers, body


def error_response(status: int, message: str) -> Response:
    """A plain-text error page: the status line's phrase and one line saying why."""
    return status, [("Content-Type", _TEXT)], f"{status} {_phrase(status)}: {message}\n".encode()


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


_DROPPED = {"content-length", "transfer-encoding", "connection"}  # framing is ours


def serialize(resp: Response, *, keep_alive: bool, head_only: bool = False,
              extra: Sequence[tuple[str, str]] = ()) -> bytes:
    """The bytes of ``resp`` on an HTTP/1.1 connection (Content-Length framing)."""
    status, headers, body = resp
    lines = [f"HTTP/1.1 {status} {_phrase(status)}"]
    lines += [f"{n}: {v}" for n, v in headers if n.lower() not in _DROPPED]
    lines += [f"{n}: {v}" for n, v in extra]
    no_body = status in (204, 304) or 100 <= status < 200
    if status == 205:  # (RFC 9110 15.3.6: no content, said with Content-Length: 0)
        body = b""
    if not no_body:
        lines.append(f"Content-Length: {len(body)}")
    if not keep_alive:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if (head_only or no_body) else head + body


#: A routed interface is also served under this name, answering in response form.
HTTP_SUFFIX = "@http"


def http_form(fn: Callable[..., Any]) -> Callable[..., Response]:
    """``fn`` answering with `to_response` of its value (wrapped at the replica)."""

    name = getattr(fn, "__name__", "handler")

    def handler(**request: Any) -> Response:
        return to_response(fn(**request), f"{name}()")

    handler.__name__ = name + HTTP_SUFFIX
    return handler
