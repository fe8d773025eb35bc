"""The commands docs/security.md gives for making the cluster CA and a host's certificate
("Making a CA and certificates") are run as written, and `polybus check` accepts the
files with the TOML the section shows; a certificate from another CA is refused."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from polybus.testing.apps import write_one_call_app

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "security.md"
HEADING = "### Making a CA and certificates"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("sh") is None,
                                reason="needs the openssl command (and sh) to run the "
                                       "commands docs/security.md gives")


def section() -> str:
    text = DOC.read_text()
    assert text.count(HEADING) == 1, f"docs/security.md has no {HEADING!r}"
    after = text.split(HEADING, 1)[1]
    return re.split(r"^#{1,3} ", after, maxsplit=1, flags=re.M)[0]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", section(), flags=re.S | re.M)


def make_pki(d: Path) -> Path:
    """Run the section's shell commands in ``d``, as a user would paste them."""
    d.mkdir()
    script = "\n".join(blocks("sh"))
    # (no terminal: a command that would ask for a passphrase fails instead of waiting)
    done = subprocess.run(["sh", "-ec", script], cwd=d, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, start_new_session=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"the documented commands failed:\n{done.stderr}"
    return d


def check(d: Path) -> subprocess.CompletedProcess[str]:
    """`polybus check app.toml` on a small app in ``d`` with the section's TOML."""
    [toml] = blocks("toml")
    write_one_call_app(d, tail="\n" + toml)
    return subprocess.run([sys.executable, "-m", "polybus", "check", "app.toml"], cwd=d,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The files the section's commands make, twice: two clusters, two CAs."""
    root = tmp_path_factory.mktemp("tlsdoc")
    return make_pki(root / "cluster"), make_pki(root / "other")


def test_the_documented_certificates_pass_polybus_check(pki: tuple[Path, Path]) -> None:
    d, _ = pki
    assert len(blocks("sh")) >= 2 and "tls = {" in blocks("toml")[0]
    for key in ("ca.key", "node.key"):  # the section's chmod 600: private to the user
        assert (d / key).stat().st_mode & 0o077 == 0, key
    done = check(d)
    assert done.returncode == 0, done.stderr
    assert "app.toml: ok" in done.stdout


def test_a_certificate_from_another_ca_is_reported(pki: tuple[Path, Path], tmp_path: Path) -> None:
    """The check above can fail: this cluster's CA with the other cluster's host files."""
    d, other = pki
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(d / "ca.pem", mixed / "ca.pem")
    for name in ("node.pem", "node.key"):
        shutil.copy(other / name, mixed / name)
    done = check(mixed)
    assert done.returncode == 2
    assert (f"cluster.tls.cert: the certificate {mixed / 'node.pem'} is not signed by the CA "
            f"{mixed / 'ca.pem'}") in done.stderr
