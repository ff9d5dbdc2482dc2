"""META.json, the distribution metadata PGXN reads, checked against the PGXN
Meta Spec v1.0.0 (https://pgxn.org/spec/, https://rfcs.pgxn.org/0001-meta-spec-v1.html)
by `pgxn_meta`, the validator of the spec's maintainers (crates.io crate
pgxn_meta, pinned in scripts/lib.sh: PGXN_META_VERSION; it validates against
the spec's JSON schemas, with the spec's `path` and `license` formats). Also:
the versions agree with Cargo.toml and webhook_dedup.control, the files it
names exist, and the validator rejects broken copies (so a pass means
something).

Needs neither root nor a cluster. The validator is found as
$WEBHOOK_DEDUP_PGXN_META, on PATH, or in ~/.cargo/bin (scripts/test.sh
installs it: `source scripts/lib.sh; ensure_pgxn_meta`).
"""

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
META = ROOT / "META.json"


def validator() -> str:
    found = (os.environ.get("WEBHOOK_DEDUP_PGXN_META") or shutil.which("pgxn_meta")
             or shutil.which("pgxn_meta", path=str(Path.home() / ".cargo" / "bin")))
    if not found:
        pytest.fail("pgxn_meta not found: install it with `source scripts/lib.sh; ensure_pgxn_meta` "
                    "(or set WEBHOOK_DEDUP_PGXN_META)", pytrace=False)
    return found


def validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([validator(), str(path)], capture_output=True, text=True, timeout=60)


def meta() -> dict:
    return json.loads(META.read_text())


def cargo_version() -> str:
    return tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def test_meta_json_is_valid_pgxn_meta_v1():
    done = validate(META)
    assert done.returncode == 0, f"pgxn_meta rejects META.json:\n{done.stdout}{done.stderr}"
    assert "is OK" in done.stdout
    # pgxn_meta picks the schema by meta-spec.version; this file is written to v1.0.0
    assert meta()["meta-spec"] == {"version": "1.0.0", "url": "https://pgxn.org/meta/spec.txt"}


def test_versions_agree_with_cargo_and_the_control_file():
    version = cargo_version()
    data = meta()
    assert data["version"] == version, "META.json's version differs from Cargo.toml's"
    assert data["provides"]["webhook_dedup"]["version"] == version, \
        "META.json's provides.webhook_dedup.version differs from Cargo.toml's"
    control = (ROOT / "webhook_dedup.control").read_text()
    default = re.search(r"^default_version\s*=\s*'([^']*)'", control, re.M).group(1)
    # cargo pgrx replaces @CARGO_VERSION@ with Cargo.toml's version when it installs
    assert default in ("@CARGO_VERSION@", version), \
        f"webhook_dedup.control's default_version {default!r} is neither @CARGO_VERSION@ nor {version}"
    # the upgrade path PGXN users take ends at this version
    assert list(ROOT.glob(f"sql/webhook_dedup--*--{version}.sql")), f"no upgrade script to {version} in sql/"


def test_named_files_exist():
    tracked = set(subprocess.run(["git", "-C", str(ROOT), "ls-files"], check=True, capture_output=True,
                                 text=True).stdout.splitlines())
    for name, extension in meta()["provides"].items():
        for field in ("file", "docfile"):
            assert extension[field] in tracked, \
                f"provides.{name}.{field} {extension[field]!r} is not a file of the repository"


def without(key):
    return lambda data: data.pop(key, None)


def changed(path, value):
    def change(data):
        *parents, last = path
        for key in parents:
            data = data.setdefault(key, {})
        data[last] = value
    return change


# Each breaks a rule of the spec; applied to a copy of META.json.
BROKEN = {
    "no name": without("name"),
    "no version": without("version"),
    "no abstract": without("abstract"),
    "no maintainer": without("maintainer"),
    "no license": without("license"),
    "no provides": without("provides"),
    "no meta-spec": without("meta-spec"),
    "a version that is no SemVer": changed(["version"], "0.2"),
    "an unknown licence shortcut": changed(["license"], "mit-ish"),
    "a name with a space": changed(["name"], "webhook dedup"),
    "a file outside the distribution": changed(["provides", "webhook_dedup", "file"], "../lib.rs"),
    "an unknown release status": changed(["release_status"], "released"),
    "an unknown top-level key": changed(["homepage"], "https://example.com/"),
    "meta-spec 1.1.0": changed(["meta-spec", "version"], "1.1.0"),
}


@pytest.mark.parametrize("what", BROKEN)
def test_validator_rejects_a_broken_copy(tmp_path, what):
    data = meta()
    BROKEN[what](data)
    assert data != meta(), f"META.json already has {what}"
    path = tmp_path / "META.json"
    path.write_text(json.dumps(data))
    done = validate(path)
    assert done.returncode != 0, f"pgxn_meta accepted META.json with {what}"
