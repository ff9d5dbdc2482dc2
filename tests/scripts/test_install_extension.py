"""scripts/lib.sh install_extension, without a build: `cargo` and
`pg_config` are fakes in a temporary directory.

What it must do: leave the installed webhook_dedup.so in place while the
release build runs (minutes), so that a server that loads the library
meanwhile (a backend starting, the background worker restarting) still
finds it; `cargo pgrx install` itself unlinks the old file right before it
copies the new one (cargo-pgrx 0.18.1 src/command/install.rs,
install_extension: `fs::remove_file(&dest)` then `copy_file`). The fake
cargo records whether the library exists when it is called, then does what
cargo pgrx install does to it; a failed build must leave the old library.
"""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_CARGO = r'''#!/usr/bin/env bash
# Records its arguments and whether the installed library exists, as
# cargo pgrx install finds it (the --pg-config it is given, --pkglibdir).
set -u
printf '%s\n' "$*" >> "$FAKE_LOG"
pg_config=
while [ $# -gt 0 ]; do
    [ "$1" = --pg-config ] && pg_config=$2
    shift
done
[ -n "$pg_config" ] || { echo "fake cargo: no --pg-config" >&2; exit 3; }
lib=$("$pg_config" --pkglibdir)/webhook_dedup.so
if [ -e "$lib" ]; then echo "library at build start: $(cat "$lib")" >> "$FAKE_LOG"
else echo "library at build start: missing" >> "$FAKE_LOG"; fi
echo "   Compiling webhook_dedup (fake)"
if [ "$FAKE_OUTCOME" = fail ]; then
    echo "error: could not compile (fake)" >&2
    exit 101
fi
# cargo pgrx install: unlink, then copy the new build in
rm -f "$lib"
echo new > "$lib"
'''

FAKE_PG_CONFIG = '''#!/usr/bin/env bash
case $1 in
    --pkglibdir) echo "{lib}" ;;
    --sharedir) echo "{share}" ;;
    *) echo "fake pg_config: $1 not faked" >&2; exit 2 ;;
esac
'''


def fake_tools(tmp: Path) -> tuple:
    bin_dir, lib = tmp / "bin", tmp / "pkglibdir"
    bin_dir.mkdir()
    lib.mkdir()
    (bin_dir / "cargo").write_text(FAKE_CARGO)
    (bin_dir / "pg_config").write_text(FAKE_PG_CONFIG.format(lib=lib, share=tmp / "share"))
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    (lib / "webhook_dedup.so").write_text("old\n")
    return bin_dir, lib


def run_lib_sh(bin_dir: Path, log: Path, commands: str, outcome: str = "ok") -> subprocess.CompletedProcess:
    """bash: source scripts/lib.sh, point it at the fakes, run commands.
    lib.sh sets PG_CONFIG from PG_MAJOR and puts ~/.cargo/bin first in PATH
    when sourced, so both are overridden after sourcing."""
    script = f'''
source "{ROOT}/scripts/lib.sh"
echo "sourced" >> "$FAKE_LOG"
PG_CONFIG="{bin_dir}/pg_config"
PATH="{bin_dir}:$PATH"
{commands}
'''
    env = {**os.environ, "FAKE_LOG": str(log), "FAKE_OUTCOME": outcome, "PG_MAJOR": "15"}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)


def test_sourcing_lib_sh_runs_nothing(tmp_path):
    bin_dir, lib = fake_tools(tmp_path)
    log = tmp_path / "log"
    done = run_lib_sh(bin_dir, log, "true")
    assert done.returncode == 0, done.stderr
    assert log.read_text() == "sourced\n", "sourcing lib.sh called cargo"
    assert (lib / "webhook_dedup.so").read_text() == "old\n"


def test_the_installed_library_stays_until_the_build_is_done(tmp_path):
    bin_dir, lib = fake_tools(tmp_path)
    log = tmp_path / "log"
    done = run_lib_sh(bin_dir, log, "install_extension")
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[1] == f"pgrx install --release --pg-config {bin_dir}/pg_config --no-default-features --features pg15"
    assert calls[2] == "library at build start: old", \
        "install_extension removed the installed webhook_dedup.so before the build"
    assert len(calls) == 3, calls
    assert (lib / "webhook_dedup.so").read_text() == "new\n"


def test_a_failed_build_leaves_the_installed_library(tmp_path):
    bin_dir, lib = fake_tools(tmp_path)
    done = run_lib_sh(bin_dir, tmp_path / "log", "install_extension; echo not reached", outcome="fail")
    assert done.returncode == 1
    assert "not reached" not in done.stdout
    # cargo's output is shown, then why it stopped
    assert "error: could not compile (fake)" in done.stderr
    assert done.stderr.rstrip().endswith("error: building or installing the extension failed")
    so = lib / "webhook_dedup.so"
    assert so.exists() and so.read_text() == "old\n", "a failed build took the installed library away"
