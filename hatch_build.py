"""The wheel's build hook: a wheel carries the examples `polybus bench` runs.

A wheel (``pip install /path/to/polybus``) has no source tree beside it, and without
them ``polybus bench sort`` measured nothing of polybus (exit status 0) and ``bench dna``
left out its pipeline. Each goes to ``polybus/bench/examples/NAME``, where
polybus/bench/exampledirs.py looks when there is no source tree. An editable install
runs from the source tree, examples/ beside it: it gets no copy (which would make a
``polybus`` folder of its own in site-packages).
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: as polybus.bench.exampledirs.SHIPPED (tests/unit/test_bench_examples_shipped.py)
SHIPPED = ("sort", "dna")


class ExamplesHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name == "wheel" and version == "standard":
            for name in SHIPPED:
                build_data["force_include"][f"examples/{name}"] = (
                    f"polybus/bench/examples/{name}")
