"""polybus bench (see BENCHMARKS.md)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?")


def main(args: argparse.Namespace) -> int:
    raise NotImplementedError("polybus bench is not built yet")
