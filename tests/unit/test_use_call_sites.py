"""The static reader of a module's calls of its use()d names (config/usecalls.py): which
call sites it follows, what it reads of each, and every shape it must leave alone."""

from __future__ import annotations

import ast
import textwrap

import pytest

from polybus.config.usecalls import rebound_functions, use_call_sites


def _sites(source: str, client: bool = True) -> list[tuple[str, int, int, tuple[str, ...]]]:
    tree = ast.parse(textwrap.dedent(source))
    return [(s.name, s.lineno, s.positional, s.keywords)
            for s in use_call_sites(tree, client)]


def test_positionals_and_keywords_of_a_module_level_name() -> None:
    assert _sites("""
        from polybus import use
        render = use("render")

        def main(t):
            render(t, gian=2.0)
            render()
            return render(t, 1, scale=3, gain=2)
    """) == [("render", 6, 1, ("gian",)), ("render", 7, 0, ()),
             ("render", 8, 2, ("scale", "gain"))]


def test_the_call_text_is_as_written_and_short() -> None:
    tree = ast.parse('from polybus import use\nr = use("r")\nr(t, gian=2.0)\n'
                     f"r({'x' * 100})\n")
    assert [s.text for s in use_call_sites(tree, True)] == ["r(t, gian=2.0)", "r(...)"]


def test_calls_that_unpack_arguments_are_left_out() -> None:
    assert _sites("""
        from polybus import use
        f = use("f")

        def main(xs, kw):
            f(*xs)
            f(1, **kw)
            f(*xs, k=1)
            f(1, k=2)
    """) == [("f", 9, 1, ("k",))]


def test_a_name_bound_in_the_function_and_by_the_enclosing_one() -> None:
    assert _sites("""
        def main():
            f = use("f")
            f(1)

            def inner():
                return f(1, 2)
            return [f(x=t) for t in range(3)]
    """) == [("f", 4, 1, ()), ("f", 7, 2, ()), ("f", 8, 0, ("x",))]


@pytest.mark.parametrize("rebinding", [
    "f = g",                  # another value
    "f = use('other')",       # another interface
    "for f in fs: pass",      # a loop target
    "with open(p) as f: pass",
    "import f",
    "from m import g as f",
    "def f(): pass",
    "class f: pass",
    "del f",
    "f += 1",
    "f, g = 1, 2",
    "try:\n    pass\nexcept E as f:\n    pass",
])
def test_a_name_bound_otherwise_in_its_scope_is_not_followed(rebinding: str) -> None:
    source = ("from polybus import use\nf = use('f')\n"
              f"{rebinding}\n\n\ndef main():\n    return f(1, 2, 3)\n")
    assert _sites(source) == []


@pytest.mark.parametrize("shadow", [
    "def main(f):\n    return f(1)",              # a parameter
    "def main(*f):\n    return f(1)",
    "def main(**f):\n    return f(1)",
    "def main():\n    f = len\n    return f(1)",   # a local of its own
    "def main():\n    global f\n    f = len\n    return f(1)",
    "def main():\n    return [f(1) for f in gs]",  # a comprehension's target
    "def main():\n    return (lambda f: f(1))(len)",
    "def main():\n    if (f := len):\n        return f(1)",
])
def test_a_name_shadowed_or_rebound_where_it_is_called_is_not_followed(shadow: str) -> None:
    assert _sites(f"from polybus import use\nf = use('f')\n\n\n{shadow}\n") == []


def test_names_bound_together_by_a_tuple() -> None:
    assert _sites("""
        from polybus import use
        f, g, h = use("f"), use("g"), len
        [a, b] = [use("a"), use("b")]
        c, *d = use("c"), use("d")
        f(1), g(2, 3), h(4), a(), b(x=1), c(5), d(6)
    """) == [("f", 6, 1, ()), ("g", 6, 2, ()), ("a", 6, 0, ()), ("b", 6, 0, ("x",))]


def test_the_same_use_on_every_branch_is_followed() -> None:
    assert _sites("""
        from polybus import use
        if fast:
            f = use("f")
        else:
            f = use("f")
        f(1)
    """) == [("f", 7, 1, ())]


def test_nonlocal_in_an_inner_function_stops_it_everywhere() -> None:
    assert _sites("""
        def main():
            f = use("f")

            def inner():
                nonlocal f
                f = len
            return f(1)
    """) == []


def test_a_class_body_is_not_seen_from_its_methods() -> None:
    # (a method's f is the module's: here there is none)
    assert _sites("""
        class Tiles:
            f = use("f")
            f(0)

            def run(self):
                return f(1)
    """) == [("f", 4, 1, ())]
    assert _sites("""
        g = use("g")

        class Tiles:
            g = 5

            def run(self):
                return g(1)
    """) == [("g", 8, 1, ())]


def test_attribute_calls_and_handed_on_names_are_not_followed() -> None:
    assert _sites("""
        from polybus import use
        render = use("render")

        def main(m, pool):
            m.render(1, 2, 3)
            other = render
            other(1, 2, 3)
            map(render, [1])
            return pool.submit(render, 1)
    """) == []


def test_aliases_of_use_and_a_call_of_use_itself() -> None:
    assert _sites("""
        import polybus as pb
        from polybus import use as u
        a = pb.use("a")
        b = u("b")
        a(1)
        b(x=1)
        u("c")(1, 2)
        u(name)(1)
    """, client=False) == [("a", 6, 1, ()), ("b", 7, 0, ("x",)), ("c", 8, 2, ())]


def test_a_served_modules_plain_use_is_polybus_only_when_imported() -> None:
    source = 'f = use("f")\nf(1)\n'
    assert _sites(source, client=False) == []
    assert _sites(source, client=True) == [("f", 2, 1, ())]


def test_a_star_import_after_the_use_may_rebind_it() -> None:
    before = 'from numpy import *\nfrom polybus import use\nf = use("f")\nf(1)\n'
    after = 'from polybus import use\nf = use("f")\nfrom numpy import *\nf(1)\n'
    assert _sites(before) == [("f", 4, 1, ())]
    assert _sites(after) == []


def test_decorators_and_defaults_are_read_where_the_function_is_defined() -> None:
    assert _sites("""
        f = use("f")

        @f(1)
        def main(x=f(2, 3), f=None):
            return f(4)
    """) == [("f", 4, 1, ()), ("f", 5, 2, ())]


def test_functions_the_served_module_binds_again() -> None:
    tree = ast.parse(textwrap.dedent("""
        import numba
        from m import h

        def f(x):
            return x

        def g(x):
            return x

        def h(x):
            return x

        def k(x):
            def k(y):
                return y
            return k

        def twice(x):
            return x

        def twice(x, y):
            return x

        def plain(x):
            return x

        f = numba.jit(f)
    """))
    assert rebound_functions(tree) == {"f", "h", "twice"}  # (k's own k is its local)


def test_a_functions_or_a_classs_own_names_are_not_the_modules() -> None:
    """A local variable, a nested def or a method of the name of a top-level function
    leaves the function the replica calls as its def says; what binds the name in the
    module's scope (under if or try, an except's name, :=, global) does not."""
    tree = ast.parse(textwrap.dedent("""
        def render(tile, gain):
            return tile

        def score(x):
            render = x * 2
            def score(y):
                return y
            return render + score(x)

        class Tile:
            def render(self):
                return 0
            score = 1

        def a(x):
            return x

        def b(x):
            return x

        def c(x):
            return x

        def d(x):
            return x

        def e(x):
            return x

        if True:
            def a(x, y=0):
                return x
        try:
            pass
        except Exception as b:
            pass
        [(c := 1) for _ in range(1)]
        [score for d in range(1)]

        def rebinding():
            global e
            e = print
    """))
    assert rebound_functions(tree) == {"a", "b", "c", "e"}
