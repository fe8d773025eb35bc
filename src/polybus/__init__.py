"""polybus: distributed programs from plain Python modules; strategy lives in the configuration."""

from __future__ import annotations

__version__ = "0.1.0"
