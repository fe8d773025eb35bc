"""`polybus bench --list`: each benchmark's name first on its line, then what it
reproduces and measures, the first line of its module's docstring (the one place a
benchmark describes itself). It printed bare names."""

from __future__ import annotations

import re

import pytest

from polybus.bench import registry
from polybus.cli.main import main


def _listed(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert main(["bench", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == registry.names(), lines
    return {name: rest.strip() for name, _, rest in (line.partition(" ") for line in lines)}


def test_each_benchmark_is_listed_with_what_it_reproduces_and_measures(
        capsys: pytest.CaptureFixture[str]) -> None:
    listed = _listed(capsys)
    assert listed["latency"] == ("Qureshi & Rashid: round trip of a call with "
                                 "0 .. 10000-byte payloads, and 1 MB.")
    assert listed["sort"] == ("Eggen et al. Tables 1-4: distributed insertion sort and "
                              "quicksort, client merges.")
    assert listed["matmul"].startswith("Schnaidt, Duman & Lewis Appendix A-C — "
                                       "distributed C = A B")
    assert listed["mandelbrot"].startswith("CORD (Kim & Purtilo) Table 1: ")
    # (the project's file names of the papers mean nothing to a user: said as authors)
    for name, said in listed.items():
        assert not re.search(r"seeds/\d{3}", said), (name, said)
    assert listed["throughput"].startswith("no-op calls per second")
    for name, said in listed.items():  # (a whole sentence each, not a line cut short)
        assert said.endswith("."), (name, said)
        assert not said.startswith(name), (name, said)


def test_a_benchmark_whose_module_says_nothing_is_listed_by_name(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.MODULES, "nothing", "polybus.plural")  # (a docstring
    monkeypatch.setitem(registry.MODULES, "missing", "polybus.no_such_module")  # / none)
    listed = _listed(capsys)
    assert listed["missing"] == ""
    assert listed["nothing"].startswith("A count with its noun")
