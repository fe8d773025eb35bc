"""A wheel carries the examples `polybus bench` runs (hatch_build.py), and a benchmark
finds them there when no source tree is beside it: installed with `pip install
/path/to/polybus`, as the README says, `polybus bench sort` measured nothing of polybus
("skipped polybus: examples/sort not found at .../lib/python3.11/examples/sort", exit
status 0), and `bench dna` left out its pipeline."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from polybus.bench import exampledirs

ROOT = Path(__file__).resolve().parents[2]


def _hook(monkeypatch: pytest.MonkeyPatch) -> Any:
    """hatch_build.py's hook class, imported with a stand-in for hatchling (a build
    dependency, not installed here)."""
    interface = types.ModuleType("hatchling.builders.hooks.plugin.interface")

    class BuildHookInterface:
        def __init__(self, target_name: str) -> None:
            self.target_name = target_name

    interface.BuildHookInterface = BuildHookInterface  # type: ignore[attr-defined]
    for name in ("hatchling", "hatchling.builders", "hatchling.builders.hooks",
                 "hatchling.builders.hooks.plugin"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, interface.__name__, interface)
    spec = importlib.util.spec_from_file_location("hatch_build", ROOT / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheel_carries_each_example_a_benchmark_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    build = _hook(monkeypatch)
    assert build.SHIPPED == exampledirs.SHIPPED
    wheel: dict[str, Any] = {"force_include": {}}
    build.ExamplesHook("wheel").initialize("standard", wheel)
    assert wheel["force_include"] == {f"examples/{n}": f"polybus/bench/examples/{n}"
                                      for n in exampledirs.SHIPPED}
    assert all((ROOT / "examples" / n).is_dir() for n in exampledirs.SHIPPED)
    editable: dict[str, Any] = {"force_include": {}}  # (it runs from the source tree)
    build.ExamplesHook("wheel").initialize("editable", editable)
    assert editable["force_include"] == {}
    from polybus.bench import b_dna, b_sort  # (what they run is among those shipped)

    for path in (b_sort.EXAMPLE, b_dna.PIPELINE):
        assert path.relative_to(exampledirs.TREE).parts[0] in exampledirs.SHIPPED


def test_without_a_source_tree_a_benchmark_runs_the_wheels_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = tmp_path / "site-packages" / "polybus" / "bench" / "examples"
    shutil.copytree(ROOT / "examples" / "sort", packaged / "sort")
    monkeypatch.setattr(exampledirs, "TREE", tmp_path / "lib" / "examples")  # (none there)
    monkeypatch.setattr(exampledirs, "PACKAGED", packaged)
    assert exampledirs.example("sort") == packaged / "sort"
    monkeypatch.setattr(exampledirs, "TREE", ROOT / "examples")  # (a checkout's, first)
    assert exampledirs.example("sort") == ROOT / "examples" / "sort"
