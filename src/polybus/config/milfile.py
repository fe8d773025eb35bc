"""What a MIL file (config/mil.py) says beyond the document it stands for: the line of
each statement, the modules it declares and its application module. The checks every
configuration goes through report a MIL file's mistakes and warnings at those lines, and
their advice in its statements (``bind client f server f ::``), not in TOML's
(``add to [bind]``), through ``Problems.mil``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MilFile"]


@dataclass(frozen=True)
class MilFile:
    lines: dict[str, int] = field(default_factory=dict)  # dotted key -> line that wrote it
    declared: dict[str, int] = field(default_factory=dict)  # module -> line of 'module x'
    app: str | None = None  # the application module (instance and bind statements)

    ADD_MODULES = ("add module blocks, each with a source: module server { source = "
                   '"server.py" :: }')
    ADD_TLS = "tls = { cert = ..., key = ..., ca = ... } :: in the application module"
    ADD_ENTRYPOINT = ('exactly one module (the client) needs entrypoint = "main" :: or '
                      "similar")

    def locate(self, key: str | None) -> int | None:
        """The line of the statement that wrote ``key`` (or its nearest table above it)."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0]
        return None

    def not_instanced(self, module: str) -> tuple[str, str] | None:
        """The message and hint for a module declared here that the application does
        not instance (so it is not in the document: it "does not exist"), or None."""
        line = self.declared.get(module)
        if line is None or self.app is None:
            return None
        return (f"module {module!r} is declared (line {line}) but not listed by 'instance' "
                f"in the application module {self.app!r}",
                f"add 'instance {module} ::' to module {self.app}")

    def add_bind(self, user: str, name: str, target: str | None) -> str:
        """How to bind ``user``'s ``name`` to ``target`` (``module.interface``, None when
        not known)."""
        module, _, iface = (target or "<module>.<interface>").partition(".")
        bind = f"bind {user} {name} {module} {iface} ::"
        if self.app is not None:
            return f"add '{bind}' to module {self.app}"
        instances = " ".join(f"instance {m} ::" for m in dict.fromkeys((user, module)))
        return ("this file has no application module, the one with the 'instance' and "
                f"'bind' statements; add one, e.g. module app {{ {instances} {bind} }}")

    @staticmethod
    def bound_as(user: str, name: str) -> str:
        return f"bound by 'bind {user} {name} ...'"

    @staticmethod
    def add_define(module: str, iface: str) -> str:
        return f"add 'define interface {iface} ::' to module {module}"

    @staticmethod
    def use_statement(name: str) -> str:
        return f"'use interface {name}' statement"
