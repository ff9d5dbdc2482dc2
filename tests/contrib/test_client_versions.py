"""The client packages are versioned with the extension: each one's
version is Cargo.toml's, which cargo pgrx writes into the control file's
default_version. No build, no database."""

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def extension_version() -> str:
    """[workspace.package]'s version, which the extension and its core inherit."""
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    assert cargo["package"]["version"] == {"workspace": True}
    core = tomllib.loads((ROOT / "crates" / "webhook-dedup-core" / "Cargo.toml").read_text())
    assert core["package"]["version"] == {"workspace": True}
    return cargo["workspace"]["package"]["version"]


def test_the_node_package_has_the_extensions_version():
    package = json.loads((ROOT / "clients" / "node" / "package.json").read_text())
    assert package["version"] == extension_version()
    lock = json.loads((ROOT / "clients" / "node" / "package-lock.json").read_text())
    assert lock["version"] == extension_version() and lock["packages"][""]["version"] == extension_version()


def test_the_python_package_has_the_extensions_version():
    pyproject = (ROOT / "clients" / "python" / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == extension_version()
    init = (ROOT / "clients" / "python" / "src" / "webhook_dedup" / "__init__.py").read_text()
    assert re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1) == extension_version()
