"""polybus.run, as a notebook's help() and tab completion show it: its keywords and what
they do (it said only "(path, overrides=(), **kwargs)", "see polybus.runner.run")."""

from __future__ import annotations

import inspect

import polybus


def test_run_shows_its_keywords_and_says_what_they_do() -> None:
    params = inspect.signature(polybus.run).parameters
    for name in ("registry", "token_file", "worker_output", "timeout"):
        assert name in params, name
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert f"``{name}``" in (polybus.run.__doc__ or ""), name


def test_run_keeps_the_runners_defaults() -> None:
    from polybus.runner import run

    ours = inspect.signature(polybus.run).parameters
    for name, p in inspect.signature(run).parameters.items():
        if name in ours:
            assert ours[name].default == p.default, name
