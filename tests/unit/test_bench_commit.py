"""A benchmark's JSON names the commit of the source it ran, and the page shows it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from polybus.bench import report, source
from polybus.bench.report import BenchResult, Row
from polybus.bench.results import load_results, render_page
from polybus.bench.stats import Stat


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_commit_of_a_checkout_and_its_dirtiness(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert source.commit_of(pkg) == {"hash": head, "dirty": False}
    (tmp_path / "untracked.txt").write_text("not counted")
    assert source.commit_of(pkg) == {"hash": head, "dirty": False}
    (pkg / "__init__.py").write_text("x = 2\n")
    assert source.commit_of(pkg) == {"hash": head, "dirty": True}


def test_no_commit_outside_a_checkout_or_for_untracked_files(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    assert source.commit_of(pkg) is None  # not a checkout
    _git(tmp_path, "init", "-q")
    assert source.commit_of(pkg) is None  # a checkout, but the package is not in it
    assert source.commit_of(tmp_path / "missing") is None


def test_machine_block_has_the_commit_only_when_known(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "source_commit", lambda: {"hash": "abc1234", "dirty": True})
    d = json.loads(BenchResult("latency").to_json())
    assert d["machine"]["commit"] == {"hash": "abc1234", "dirty": True}
    monkeypatch.setattr(report, "source_commit", lambda: None)
    assert "commit" not in json.loads(BenchResult("latency").to_json())["machine"]


def test_page_header_shows_the_recorded_commit(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    res = BenchResult("latency", {"date": "2026-11-21 10:00 UTC"}, x_label="payload bytes")
    res.add(Row.of("polybus", {}, 0, "rtt_us", Stat(1.0, 1.0, 1.0, 3)))
    monkeypatch.setattr(report, "source_commit", lambda: {"hash": "abc1234", "dirty": True})
    res.write_json(tmp_path / "latency.json")
    monkeypatch.setattr(report, "source_commit", lambda: {"hash": "fff0000", "dirty": False})
    page = render_page(load_results(tmp_path), tmp_path / "results.md", tmp_path)
    assert "- commit: abc1234 (with uncommitted changes)\n" in page
    assert "fff0000" not in page  # the JSON's commit, not the one rendering the page
    assert render_page(load_results(tmp_path), tmp_path / "results.md", tmp_path) == page
    (tmp_path / "latency.json").write_text(
        (tmp_path / "latency.json").read_text().replace('"commit"', '"other"'))
    assert "- commit: not recorded\n" in render_page(load_results(tmp_path),
                                                    tmp_path / "results.md", tmp_path)


def test_commit_of_leaves_the_checkouts_index_alone(tmp_path: Path) -> None:
    """Review (rev2): `git status` refreshes a stale index and writes it back, under
    .git/index.lock; killed at GIT_TIMEOUT_S (SIGKILL: subprocess.run's timeout) it
    leaves that lock behind, and the user's next `git commit` fails ("Another git
    process seems to be running"). Asked with --no-optional-locks, it writes nothing."""
    import os

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    index = tmp_path / ".git" / "index"
    st = (pkg / "__init__.py").stat()
    os.utime(pkg / "__init__.py", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    before = index.stat().st_mtime_ns, index.read_bytes()
    assert source.commit_of(pkg) is not None
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before
