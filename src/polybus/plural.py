"""A count with its noun, as a person writes it: "1 request", "5 requests"; a noun with
its article: "an int", "a str" (messages).

Imports nothing of polybus: any module, a process-pool child's too, can use it."""

from __future__ import annotations

__all__ = ["plural", "with_article"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, which takes an "s" unless ``n`` is 1 (``many``: the plural
    when it is not noun + "s": ``plural(2, "process", "processes")``)."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def with_article(noun: str) -> str:
    """``noun`` with its indefinite article, by its first letter: "an int", "a str"."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
