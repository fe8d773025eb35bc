"""``[serve]``: routes bound to module interfaces; mistakes named with file, key and hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import load, validate
from polybus.config.model import CallStyle

WEB = '''\
def page():
    return "hi"


def api(method, query, body=b"", **rest):
    return {}


def files(subpath, /, headers):
    return b""


def needs(user_id):
    return 1
'''

BASE = '''\
[modules.web]
source = "web.py"
replication = 2
define.page = { pool = 4, timeout = "3s" }
define.api = {}
define.files = {}
define.needs = {}

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /" = "web.page"
"/api/*" = { to = "web.api", callstyle = "async-demand(2)", timeout = "2s" }
'''


def app(tmp_path: Path, extra: str = "", base: str = BASE) -> Path:
    (tmp_path / "web.py").write_text(WEB)
    p = tmp_path / "app.toml"
    p.write_text(base + extra)
    return p


def errors(path: Path, *sets: str) -> list[tuple[str | None, str, str | None]]:
    config, errs = validate(path, sets)
    assert config is None and errs
    return [(e.key, e.bare_message, e.hint) for e in errs]


def test_a_serve_only_configuration_loads(tmp_path: Path) -> None:
    cfg = load(app(tmp_path))
    assert cfg.client == "" and cfg.serve is not None
    page, api = cfg.serve.routes
    assert (page.method, page.path, page.module, page.interface) == ("GET", "/", "web", "page")
    assert page.use.callstyle == CallStyle("async") and page.fields == ()
    assert api.method is None and api.path == "/api/*"
    assert api.use.callstyle == CallStyle("async-demand", 2) and api.use.timeout == 2.0
    assert set(api.fields) == {"method", "path", "query", "headers", "body", "subpath"}
    assert cfg.serve.listen == "127.0.0.1:0" and cfg.serve.max_body == 1 << 20
    assert cfg.serve.interfaces_of("web") == ["page", "api"]


def test_routes_go_to_the_least_loaded_replica_unless_told(tmp_path: Path) -> None:
    """A route's requests go each to the least loaded replica by default (a rotation
    sends every other request to a replica busy with a long one); a route's own
    balance, or a loadratio (a split by share), says otherwise."""
    extra = ('"GET /r" = { to = "web.page", loadratio = "1:2" }\n'
             '"GET /n" = { to = "web.page", balance = "none" }\n'
             '"GET /t" = { to = "web.page", timeout = "1s" }\n')
    cfg = load(app(tmp_path, extra))
    assert cfg.serve is not None
    by = {r.key: r.use for r in cfg.serve.routes}
    assert by["GET /"].balance == "least" and by["GET /t"].balance == "least"
    assert by["GET /r"].balance == "none" and by["GET /r"].loadratio == (1.0, 2.0)
    assert by["GET /n"].balance == "none"
    assert by["/api/*"].balance == "none"  # (async-demand: the least loaded with room already)
    from polybus.http.frontdoor import _bindings

    made = {b.name: use for b, use in _bindings(cfg, cfg.serve)}  # what the session is given
    assert made["GET /"].balance == "least" and made["GET /n"].balance == "none"


def test_defaults_are_loopback_and_bounded(tmp_path: Path) -> None:
    cfg = load(app(tmp_path), ["serve.listen=127.0.0.1:8080", "serve.max_body=2KiB"])
    assert cfg.serve is not None
    assert cfg.serve.listen == "127.0.0.1:8080" and cfg.serve.max_body == 2048
    assert not cfg.serve.tracebacks and cfg.serve.max_connections >= 1


def test_unknown_keys_name_the_nearest(tmp_path: Path) -> None:
    found = errors(app(tmp_path, 'max_bdy = 10\n"GET /x" = { to = "web.page", tiemout = 1 }\n'))
    assert ("serve.routes.max_bdy", "bad route 'max_bdy': a route path starts with '/', got "
            "'max_bdy'", "did you mean 'max_body' of [serve]? it is under [serve.routes] here"
            ) in found
    assert any(k == 'serve.routes."GET /x".tiemout' and h == "did you mean 'timeout'?"
               for k, _, h in found)
    found = errors(app(tmp_path), "serve.max_bdy=1")
    assert found[0][0] == "serve.max_bdy" and found[0][2] == "did you mean 'max_body'?"


def test_a_use_option_a_route_does_not_take_is_only_unknown(tmp_path: Path) -> None:
    """forward is a use option but not a route's: said unknown, and not
    also checked against the route's callstyle as if it were taken."""
    found = errors(app(tmp_path), 'serve.routes."/x"={to="web.page", '
                   'callstyle="async-demand(2)", forward="keep"}')
    assert [(k, m) for k, m, _ in found] == [
        ('serve.routes."/x".forward', "unknown key 'forward'")], found


def test_a_misspelled_method_is_named(tmp_path: Path) -> None:
    found = errors(app(tmp_path, '"GTE /g" = "web.page"\n"FROB /f" = "web.page"\n'))
    assert ('serve.routes."GTE /g"', "bad route 'GTE /g': unknown HTTP method 'GTE'",
            "did you mean 'GET'?") in found
    assert any(k == 'serve.routes."FROB /f"' and h.startswith("one of GET, HEAD")
               for k, _, h in found)


def test_bad_targets(tmp_path: Path) -> None:
    found = errors(app(tmp_path, '"GET /a" = "wbe.page"\n"GET /b" = "web.pgae"\n'
                                 '"GET /c" = "web"\n"GET /d" = { callstyle = "async" }\n'))
    assert ('serve.routes."GET /a"', "route target module 'wbe' does not exist",
            "did you mean 'web'?") in found
    assert ('serve.routes."GET /b"', "module 'web' has no interface 'pgae'",
            "did you mean 'page'?") in found
    assert any(k == 'serve.routes."GET /c"' and "bad route target" in m for k, m, _ in found)
    assert any(k == 'serve.routes."GET /d"' and "needs 'to'" in m for k, m, _ in found)


def test_a_route_to_a_function_the_define_table_leaves_out_says_to_add_it(
        tmp_path: Path) -> None:
    """As a [bind] entry to it would: a module with a define table serves only what it
    lists, so a route to another of its functions (or a near miss of one) is told the
    define entry that serves it."""
    base = BASE.replace("define.files = {}\n", "")
    found = errors(app(tmp_path, '"/f/*" = "web.files"\n', base=base))
    assert ('serve.routes."/f/*"', "module 'web' does not serve 'files': a module with a "
            "define table serves only the interfaces it lists (page, api, needs)",
            "add define.files = {} to [modules.web]") in found
    found = errors(app(tmp_path, '"/f/*" = "web.fils"\n', base=base))
    assert ('serve.routes."/f/*"', "module 'web' has no interface 'fils'",
            "did you mean 'files'? its define table lists only page, api, needs, not that "
            "function: add define.files = {} to [modules.web]") in found
    found = errors(app(tmp_path), 'serve.routes."/f/*"="web.files"',
                   "modules.web.define={page={}}")
    assert any(k == "modules.web.define" and "does not serve 'files'" in m
               and 'serve.routes."/f/*" routes it' in m for k, m, _ in found), found


def test_bad_route_keys_and_listen(tmp_path: Path) -> None:
    found = errors(app(tmp_path, '"get /x" = "web.page"\n"/" = "web.page"\n'),
                   "serve.listen=localhost")
    keys = [k for k, _, _ in found]
    assert 'serve.routes."get /x"' in keys
    assert any("bad listen address" in m and k == "serve.listen" for k, m, _ in found)
    assert not any("same as" in m for _, m, _ in found)  # "/" and "GET /" both may be
    found = errors(app(tmp_path, '"/x/" = "web.page"\n"/x" = "web.page"\n"/a/*/b" = "web.page"\n'))
    assert ('serve.routes."/x"', "route '/x' is the same as '/x/'", None) in found
    assert any("'*' may only end a path" in m for _, m, _ in found)


def test_handler_parameters_must_be_request_fields(tmp_path: Path) -> None:
    found = errors(app(tmp_path, '"GET /n" = "web.needs"\n"GET /f/*" = "web.files"\n'))
    assert any(k == 'serve.routes."GET /n"' and "'user_id'" in m for k, m, _ in found)
    assert any("positional-only" in m for _, m, _ in found)


def test_a_client_program_and_serve_only_are_both_fine_but_not_nothing(tmp_path: Path) -> None:
    p = app(tmp_path, base=BASE.split("[serve]")[0])
    found = errors(p)
    assert found[0][1] == "no module has an entrypoint" and "[serve]" in (found[0][2] or "")
    found = errors(app(tmp_path, base=BASE.split("[serve.routes]")[0]))
    assert found[0][0] == "serve.routes" and "needs routes" in found[0][1]


def test_run_refuses_a_serve_only_configuration(tmp_path: Path) -> None:
    from polybus.errors import ConfigError
    from polybus.runner import run

    with pytest.raises(ConfigError, match="polybus serve"):
        run(app(tmp_path))


def test_the_grace_of_requests_in_flight_at_a_stop(tmp_path: Path) -> None:
    cfg = load(app(tmp_path))
    assert cfg.serve is not None and cfg.serve.grace == 5.0
    cfg = load(app(tmp_path), ["serve.grace=0"])  # (answered 503 at once)
    assert cfg.serve is not None and cfg.serve.grace == 0.0
    cfg = load(app(tmp_path), ["serve.grace=30s"])
    assert cfg.serve is not None and cfg.serve.grace == 30.0
    found = errors(app(tmp_path), "serve.grace=-1")
    assert found[0][0] == "serve.grace" and "must not be negative" in found[0][1]


def test_the_slow_client_limits(tmp_path: Path) -> None:
    """head_timeout (a request head whole within it) and min_body_rate (bytes a second a
    body may fall head_timeout behind): bounded by default, set as other limits."""
    cfg = load(app(tmp_path))
    assert cfg.serve is not None
    assert cfg.serve.head_timeout == 10.0 and cfg.serve.min_body_rate == 1024
    cfg = load(app(tmp_path), ["serve.head_timeout=2s", "serve.min_body_rate=64KiB"])
    assert cfg.serve is not None
    assert cfg.serve.head_timeout == 2.0 and cfg.serve.min_body_rate == 65536
    found = errors(app(tmp_path), "serve.head_timeout=0", "serve.min_body_rate=0")
    assert any(k == "serve.head_timeout" and "expected a duration > 0" in m
               for k, m, _ in found), found
    assert ("serve.min_body_rate", "expected at least 1 (bytes a second), got 0", 'e.g. "1KiB"'
            ) in found


@pytest.mark.parametrize(("tail", "sets"), [
    ("[serve.routes]\n", ()),
    ('routes = {}\n', ()),
    ('routes = { "GET /" = "web.page" }\n', ("serve.routes={}",)),
])
def test_an_empty_routes_table_is_refused_as_a_missing_one(
        tmp_path: Path, tail: str, sets: tuple[str, ...]) -> None:
    # It passed check with 0 routes: every request a 404.
    p = app(tmp_path, base=BASE.split("[serve.routes]")[0] + tail)
    config, errs = validate(p, sets)
    assert config is None
    assert [(e.key, e.bare_message) for e in errs] == [
        ("serve.routes", "[serve] needs routes: its routes table is empty, so every request "
                         "would be answered 404")]
    assert errs[0].hint is not None and '"GET /" = "web.page"' in errs[0].hint
    if not sets:  # (at the line that wrote it)
        assert errs[0].line == len(p.read_text().splitlines())
