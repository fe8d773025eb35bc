"""A binding to a method (a Ray actor ported as it was: a class, an instance of it at the
top of the module): only a module's top-level functions are interfaces, so such a
binding is refused; this says what the source shows the name to be, and the function
to write instead (config/bind.py)."""

from __future__ import annotations

import ast

from polybus.config.source import SourceInfo

__all__ = ["method_of"]


def _defines(cls: ast.ClassDef, name: str) -> bool:
    return any(isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == name
               for s in cls.body)


def _made_of(node: ast.stmt | None) -> str | None:
    """The class a top-level ``x = C(...)`` makes an instance of, if it is one."""
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
            and isinstance(node.value.func, ast.Name):
        return node.value.func.id
    return None


def method_of(info: SourceInfo, iface: str) -> tuple[str, str] | None:
    """(what ``iface`` is, the function to serve instead) when it names a method, of a
    top-level object (``model.compare``) or of a class of the module (``compare``, a
    method of ``class Model``); None otherwise."""
    head, dot, name = iface.rpartition(".")
    file = info.path.name
    classes = {o.name: o for o in info.others.values() if isinstance(o.node, ast.ClassDef)}
    if dot:
        obj = info.others.get(head)
        if obj is None:
            return None
        cls = classes.get(_made_of(obj.node) or "")
        what = ("a method" if cls is not None and isinstance(cls.node, ast.ClassDef)
                and _defines(cls.node, name) else "an attribute")
        where = f"{file}:{obj.lineno}: {obj.text}" if obj.text else f"{file}:{obj.lineno}"
        of = f"{what} of {head!r} ({where})"
        call = f"{head}.{name}"
        make = ""
    else:
        found = next((c for c in classes.values() if isinstance(c.node, ast.ClassDef)
                      and _defines(c.node, iface)), None)
        if found is None:
            return None
        of = f"a method of class {found.name} ({file}:{found.lineno})"
        inst = next((o.name for o in info.others.values()
                     if _made_of(o.node) == found.name), None)
        make = "" if inst is not None else f"_{found.name.lower()} = {found.name}(), then "
        call = f"{inst or '_' + found.name.lower()}.{iface}"
    return (f"an interface is a top-level function of {file}, and {name!r} is {of}",
            f"serve a function that calls it, in {file}: {make}def {name}(*args, **kwargs): "
            f"return {call}(*args, **kwargs)")
