"""The benchmark suite of record (BENCHMARKS.md): peers side by side, medians, ratios.

Nothing heavy is imported here; :mod:`polybus.bench.registry` loads a benchmark's
module only when it is run.
"""

from __future__ import annotations
