"""Handler values -> responses -> bytes; and routing. Pure."""

from __future__ import annotations

import datetime
import decimal
import json

import numpy as np
import pytest

from polybus.http.response import error_response, http_form, serialize, to_response
from polybus.http.routes import RouteTable, split_route_key


def test_values_map_to_responses() -> None:
    assert to_response("hi") == (200, [("Content-Type", "text/plain; charset=utf-8")], b"hi")
    assert to_response(" <!DOCTYPE html><p>")[1] == [("Content-Type", "text/html; charset=utf-8")]
    assert to_response(b"\x00") == (200, [("Content-Type", "application/octet-stream")], b"\x00")
    status, headers, body = to_response({"a": [1, 2.5, None]})
    assert status == 200 and headers == [("Content-Type", "application/json")]
    assert json.loads(body) == {"a": [1, 2.5, None]}
    assert json.loads(to_response(np.arange(3))[2]) == [0, 1, 2]
    assert to_response(None) == (204, [], b"")


def test_tuples_give_full_control() -> None:
    assert to_response((201, "made")) == (201, [("Content-Type", "text/plain; charset=utf-8")], b"made")
    status, headers, body = to_response((302, {"Location": "/x"}, None))
    assert status == 302 and headers == [("Location", "/x")] and body == b""
    assert to_response((200, [("Content-Type", "text/csv")], "a,b"))[1] == [("Content-Type", "text/csv")]


@pytest.mark.parametrize("bad", [{1, 2}, (200,), (99, "x"), ("200", "x"), (200, "nope", "x"),
                                 (200, {"X": "a\r\nb"}, "x"), object()])
def test_what_is_not_a_response_is_an_error(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        to_response(bad)


@pytest.mark.parametrize(("bad", "message"), [
    ((999, "x"), "page() returned a bad response status 999 (an integer from 200 to 599)"),
    ((200,), "page() returned a tuple of 1 item: a response tuple is (status, body) or "
             "(status, headers, body)"),
    ((200, "nope", "x"), "page() returned response headers that are not a dict or a list of "
                         "(name, value) pairs"),
    ((200, [("X",)], "x"), "page() returned a response header that is not a (name, value) pair"),
    ((200, {"X": "a\r\nb"}, "x"),
     "page() returned a response header 'X' with a forbidden character (CR, LF, NUL or "
     "another control character but HTAB)"),
    # (it passed here, and serializing it dropped the connection without a status)
    ((200, {"X-Who": "Zo\u00eb \u2713"}, "x"),
     "page() returned a response header 'X-Who' that HTTP/1.1 cannot carry (a name is "
     "ASCII, a value Latin-1): encode other text first (e.g. urllib.parse.quote)"),
])
def test_a_bad_response_tuple_names_the_handler(bad: object, message: str) -> None:
    # A new user's `(999, "x")` said only "bad response status 999", naming no handler.
    with pytest.raises((TypeError, ValueError)) as info:
        to_response(bad, "page()")
    assert str(info.value) == message


def test_what_is_not_a_response_is_said_with_its_article_and_the_handler() -> None:
    with pytest.raises(TypeError, match=r"^a handler returned an object, which is not a "):
        to_response(object())
    with pytest.raises(TypeError, match=r"^a handler returned a set, which is not a "):
        to_response({1})

    def weird() -> object:
        return object()

    with pytest.raises(TypeError, match=r"^weird\(\) returned an object, which is not a "):
        http_form(weird)()


@pytest.mark.parametrize("value", [float("nan"), [1.0, float("inf")], {"x": -float("inf")},
                                   np.array([np.nan])])
def test_json_is_strict_a_nan_is_an_error_naming_the_handler(value: object) -> None:
    # json.dumps wrote NaN / Infinity, which no JSON parser takes, as application/json.
    def floaty() -> object:
        return value

    with pytest.raises(ValueError, match=r"^floaty\(\) returned a value that is not valid "
                       r"JSON: it holds a float NaN or infinity, which JSON has no form for; "
                       r"return None \(null\) or a string in its place$"):
        http_form(floaty)()


def test_numpy_values_inside_a_json_answer_are_converted() -> None:
    # A dict holding an array or a numpy integer was a 500, "Object of type ndarray is
    # not JSON serializable", though an array alone is JSON.
    def stats() -> object:
        x = np.arange(3.0)
        return {"values": x, "n": np.int64(3), "rows": [np.arange(2), (np.bool_(True),)]}

    status, headers, body = http_form(stats)()
    assert status == 200 and headers == [("Content-Type", "application/json")]
    assert json.loads(body) == {"values": [0.0, 1.0, 2.0], "n": 3, "rows": [[0, 1], [True]]}


def test_a_nan_inside_a_numpy_array_inside_a_dict_is_still_refused() -> None:
    def floaty() -> object:
        return {"x": [np.array([1.0, np.nan])]}

    with pytest.raises(ValueError, match=r"^floaty\(\) returned a value that is not valid JSON"):
        http_form(floaty)()


@pytest.mark.parametrize(("value", "where", "kind"), [
    ({"t": datetime.datetime(2024, 1, 2)}, "['t']", "a datetime"),
    ([1, {"a": {2, 3}}], "[1]['a']", "a set"),
    ({"d": decimal.Decimal("1.5")}, "['d']", "a Decimal"),
    ({(1, 2): "x"}, "a key of the dict at the top", "a tuple"),
])
def test_a_value_json_has_no_form_for_is_said_where_naming_the_handler(
        value: object, where: str, kind: str) -> None:
    # It was "TypeError: Object of type datetime is not JSON serializable", naming
    # neither the handler nor where in its value the datetime was.
    def handler() -> object:
        return value

    with pytest.raises(TypeError) as info:
        http_form(handler)()
    message = str(info.value)
    assert message.startswith("handler() returned a value that is not valid JSON: ")
    assert where in message and kind in message


def test_http_form_passes_the_fields_and_converts() -> None:
    def handler(method: str, body: bytes) -> dict[str, object]:
        return {"m": method, "n": len(body)}

    wrapped = http_form(handler)
    assert wrapped(method="PUT", body=b"abc")[2] == b'{"m":"PUT","n":3}'


def test_serialize_frames_the_body() -> None:
    raw = serialize((200, [("X-A", "1"), ("Content-Length", "999")], b"hey"), keep_alive=True)
    assert raw == b"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nhey"
    closing = serialize(error_response(404, "no route"), keep_alive=False)
    assert closing.startswith(b"HTTP/1.1 404 Not Found\r\n") and b"Connection: close\r\n" in closing
    assert closing.endswith(b"\r\n\r\n404 Not Found: no route\n")
    assert serialize((200, [], b"body"), keep_alive=True, head_only=True).endswith(b"\r\n\r\n")
    assert b"Content-Length" not in serialize((204, [], b""), keep_alive=True)


def test_route_keys() -> None:
    assert split_route_key("GET /") == ("GET", "/")
    assert split_route_key("/api/") == (None, "/api")
    assert split_route_key("POST /api/*") == ("POST", "/api/*")
    for bad in ("get /", "GET", "GET x", "GET /a/*/b", "A B C"):
        with pytest.raises(ValueError):
            split_route_key(bad)


def test_route_matching() -> None:
    t = RouteTable([("GET", "/", "index"), (None, "/api/*", "api"), ("POST", "/api/up", "up"),
                    ("GET", "/static/*", "static"), ("GET", "/static/big/*", "big")])
    assert t.match("GET", "/").target == "index"
    assert t.match("GET", "/nope").target is None and not t.match("GET", "/nope").allowed
    m = t.match("DELETE", "/api/x/y")
    assert (m.target, m.subpath) == ("api", "/x/y")
    assert t.match("POST", "/api/up").target == "up"
    assert t.match("GET", "/api").target == "api" and t.match("GET", "/apix").target is None
    assert t.match("GET", "/static/big/a").target == "big"
    assert t.match("HEAD", "/static/a").target == "static"
    m = t.match("POST", "/static/a")
    assert m.target is None and m.allowed == ("GET", "HEAD")  # (HEAD: by GET routes)


def test_a_latin1_header_value_goes_as_latin1() -> None:
    resp = to_response((200, {"X-Who": "Zo\u00eb"}, "x"), "page()")
    assert b"X-Who: Zo\xeb\r\n" in serialize(resp, keep_alive=True)


@pytest.mark.parametrize("value", ["a\x0bb", "a\x1b[31mb", "a\x7fb", "a\x0cb", "\x01"])
def test_a_response_header_with_any_control_character_but_htab_is_refused(value: str) -> None:
    """RFC 9110 5.5: a field value is visible characters, SP and HTAB; a sender MUST
    NOT generate others. Only CR, LF and NUL were refused: a vertical tab, form feed
    (which some clients take for whitespace) or a terminal escape went out as given."""
    with pytest.raises(ValueError, match="forbidden character"):
        to_response((200, {"X": value}, "x"), "page()")
    assert to_response((200, {"X": "a\tb"}, "x"), "page()")[1][0] == ("X", "a\tb")


def test_a_205_goes_without_content() -> None:
    """RFC 9110 15.3.6: a server MUST NOT generate content in a 205 (Reset Content)
    response; a handler's `(205, "done")` sent "done"."""
    raw = serialize(to_response((205, "done"), "page()"), keep_alive=True)
    assert raw.endswith(b"\r\n\r\n") and b"done" not in raw
    assert b"Content-Length: 0\r\n" in raw
