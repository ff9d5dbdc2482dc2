#!/usr/bin/env bash
# Builds the packages a DBA installs from, into DIR (default target/package):
#   postgresql-$PG_MAJOR-webhook-dedup_<version>_<arch>.deb  the extension for
#       PostgreSQL $PG_MAJOR (library, control file, install and upgrade
#       scripts), built by `cargo pgrx package` (release);
#   webhook_dedup-<version>.tar.gz  the source distribution: `git archive` of
#       HEAD (committed files only), with META.json for PGXN;
#   webhook_dedup-tle--<version>.sql and webhook_dedup-sql--<version>.sql  the
#       SQL edition (docs/sql-edition.md), for managed PostgreSQL: through
#       pg_tle, and with psql -f; written from the packaged install script and
#       editions/sql (the same for every major). 0.4.0 is its first version:
#       upgrade scripts (webhook_dedup-sql--<from>--<to>.sql, and
#       pgtle.install_update_path in the pg_tle file) start with the next.
# <version> is Cargo.toml's (cargo pgrx writes it into webhook_dedup.control's
# default_version); it must equal META.json's. PG_MAJOR as in scripts/lib.sh
# (default 15). Install the .deb with `sudo apt-get install ./<file>.deb`.
#
# Usage: scripts/package.sh [--out DIR] [--repo REPO]
#
# --repo REPO also adds the .deb to REPO, a flat apt repository (Debian's
# repository format, "flat repository": the packages, Packages, Packages.gz
# and Release in one directory; https://wiki.debian.org/DebianRepository/Format),
# made when missing and indexed again with every package it holds (one per
# PostgreSQL major built into it: PG_MAJOR=16 scripts/package.sh --repo REPO
# adds postgresql-16-webhook-dedup beside the others). A machine installs
# from it with the source line
#   deb [trusted=yes] file:/absolute/path/to/REPO ./
# (unsigned: trusted=yes, for a repository on the machine itself or one
# served from a host you trust; sign Release yourself to publish it).
#
# Reproducible: two runs in one checkout give byte-identical files (the
# install script's statements put in a canonical order, every date HEAD's
# commit time, compression pinned; see below; tests/package/
# test_reproducible.py checks it). A checkout at another path gives another
# webhook_dedup.so: rustc and cc record the build's paths (pgrx-pg-sys's
# generated bindings and C shim under target/), and even with rustc's
# --remap-path-prefix about 600 bytes still differed (measured 2026-12-01).
#
# Needs no root: the files are staged in a temporary directory and
# `dpkg-deb --root-owner-group` records them as owned by root:root. Needs
# Rust, cargo-pgrx 0.18.1 (installed when missing), the PostgreSQL server
# headers (postgresql-server-dev-$PG_MAJOR), dpkg-dev and git. Runs lintian
# on the .deb when it is installed, for information only.
source "$(dirname "$0")/lib.sh"

usage="usage: $0 [--out DIR] [--repo REPO]"
out=$ROOT/target/package
repo=
while [ $# -gt 0 ]; do
    case $1 in
        --out) [ $# -ge 2 ] || die "$usage"; out=$2; shift 2 ;;
        --out=*) out=${1#--out=}; shift ;;
        --repo) [ $# -ge 2 ] || die "$usage"; repo=$2; shift 2 ;;
        --repo=*) repo=${1#--repo=}; shift ;;
        -h | --help) echo "$usage"; exit 0 ;;
        *) die "unknown argument $1; $usage" ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

for tool in dpkg dpkg-deb dpkg-shlibdeps git gzip python3 strip; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian packages dpkg-dev, binutils, git, python3)"
done
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found: install postgresql-server-dev-$PG_MAJOR"
ensure_rust
ensure_cargo_pgrx

# META.json (PGXN) is the one place for the maintainer and the abstract.
meta() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$ROOT/META.json" "$1"
}
version=$(project_version)
[ -n "$version" ] || die "no [workspace.package] version in $ROOT/Cargo.toml"
[ "$(meta version)" = "$version" ] || die "META.json has version $(meta version), Cargo.toml $version"
maintainer=$(meta maintainer)
synopsis=$(meta abstract)
description=$(meta description)
arch=$(dpkg --print-architecture)
pkg=$(deb_package_name)
deb=$out/${pkg}_${version}_${arch}.deb
tarball=$out/webhook_dedup-$version.tar.gz
commit=$(git -C "$ROOT" rev-parse --short HEAD)
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
    log "note: the working tree has uncommitted changes; the .deb is built from them, the tarball from HEAD ($commit)"
    commit="$commit with uncommitted changes"
fi
# Reproducible dates: the files' mtimes and the changelog's date are HEAD's
# commit time (https://reproducible-builds.org/specs/source-date-epoch/).
SOURCE_DATE_EPOCH=$(git -C "$ROOT" log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH

stage=$(mktemp -d "${TMPDIR:-/tmp}/webhook_dedup_package.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root

# cargo's own progress (its progress bar on a terminal, a line per crate
# otherwise) goes to stderr as it comes: the release build (fat LTO, one
# codegen unit) is the long step. Stdout stays for the four paths printed at
# the end.
log "1/7 cargo pgrx package: webhook_dedup $version for PostgreSQL $PG_MAJOR (release build: 2 to 3 minutes on 2 cores from scratch, seconds when target/release is up to date; cargo's output follows)"
(cd "$ROOT" && cargo pgrx package --pg-config "$PG_CONFIG" --no-default-features \
    --features "pg$PG_MAJOR" --out-dir "$root") >&2 || die "cargo pgrx package failed (its output is above)"
# Debian's layout for PostgreSQL $PG_MAJOR (postgresql-common: the library
# in /usr/lib/postgresql/N/lib, the extension's files in
# /usr/share/postgresql/N/extension), whatever build's pg_config compiled
# it: a major that Debian 12 does not ship is built against a PyPI build
# (scripts/lib.sh, use_pg_major), whose directories are elsewhere.
built_lib=$("$PG_CONFIG" --pkglibdir)
built_share=$("$PG_CONFIG" --sharedir)
lib=$root/usr/lib/postgresql/$PG_MAJOR/lib/webhook_dedup.so
extdir=$root/usr/share/postgresql/$PG_MAJOR/extension
if [ "$root$built_lib" != "${lib%/*}" ] || [ "$root$built_share/extension" != "$extdir" ]; then
    mkdir -p "${lib%/*}" "$extdir"
    mv "$root$built_lib"/webhook_dedup.so "$lib"
    mv "$root$built_share"/extension/webhook_dedup* "$extdir"/
    # what is left of the build's own directories: nothing but empty ones
    # (bitcode is not built: cargo pgrx builds none for Rust)
    find "$root" -depth -type d -empty -delete
    [ -z "$(find "$root" -type f ! -path "$root/usr/lib/postgresql/*" ! -path "$root/usr/share/postgresql/*")" ] \
        || die "cargo pgrx package wrote files outside the library and extension directories: $(find "$root" -type f)"
fi
for f in "$lib" "$extdir/webhook_dedup.control" "$extdir/webhook_dedup--$version.sql"; do
    [ -f "$f" ] || die "cargo pgrx package did not produce ${f#"$root"}"
done
grep -qx "default_version = '$version'" "$extdir/webhook_dedup.control" \
    || die "the packaged webhook_dedup.control's default_version is not '$version'"

# cargo-pgrx 0.18.1 orders the install script's independent blocks
# differently from run to run (HashMap iteration under tarjan_scc; the
# reason and the source in scripts/canonical_install_sql.py): one order,
# the same every time, that keeps every dependency the script declares.
log "2/7 the install script's statements in canonical order (scripts/canonical_install_sql.py)"
python3 "$ROOT/scripts/canonical_install_sql.py" --source-root "$ROOT" "$extdir/webhook_dedup--$version.sql" \
    || die "scripts/canonical_install_sql.py refused webhook_dedup--$version.sql (why: above)"

# What dh_strip does to a shared library (debhelper's dh_strip(1)); the
# exported symbols PostgreSQL looks up (Pg_magic_func, pg_finfo_*) stay.
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$lib"

# Documentation (Debian Policy 12.5 copyright; 12.7: the changelog of a
# native package, one without a Debian revision, is changelog.gz).
log "3/7 copyright, the linked crates' licence files, changelog (cargo tree, cargo metadata)"
doc=$root/usr/share/doc/$pkg
mkdir -p "$doc"
first_year=$(git -C "$ROOT" log --format=%cd --date=format:%Y | sort -u | sed -n 1p)
last_year=$(git -C "$ROOT" log -1 --format=%cd --date=format:%Y)
years=$first_year
[ "$first_year" = "$last_year" ] || years="$first_year-$last_year"
{
    # https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: webhook_dedup"
    echo "Upstream-Contact: $maintainer"
    echo "Comment: $(basename "$lib") (with its own core crate, webhook-dedup-core) links in these Rust crates (cargo tree, normal"
    echo " dependencies with features pg$PG_MAJOR), each under the licence its Cargo.toml"
    echo " states (SPDX expression):"
    (cd "$ROOT" && cargo tree --locked --edges normal,no-proc-macro --prefix none \
        --format '{p}: {l}' --no-default-features --features "pg$PG_MAJOR") \
        | grep -Ev '^webhook(_dedup|-dedup-core) ' | sed 's/ (\*)$//; s/ (proc-macro)//' | LC_ALL=C sort -u | sed 's/^/ /'
    echo
    echo "Files: *"
    echo "Copyright: $years $(git -C "$ROOT" log --format=%an | LC_ALL=C sort -u | paste -sd, | sed 's/,/, /g')"
    echo "License: Expat"
    sed 's/^$/./; s/^/ /' <<'EOF'
Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
EOF
} > "$doc/copyright"
# The notices those crates' licences ask a binary distribution to carry
# (BSD-3-Clause, Apache-2.0 NOTICE files, ...): every LICENSE*, COPYING*,
# NOTICE* and COPYRIGHT* file each crate's source holds, as published, under
# third-party/<crate>-<version>/ (paths from cargo metadata).
(cd "$ROOT" && cargo tree --locked --edges normal,no-proc-macro --prefix none --format '{p}' \
    --no-default-features --features "pg$PG_MAJOR") | sed 's/ (\*)$//; s/ (proc-macro)//' \
    | LC_ALL=C sort -u > "$stage/crates"
(cd "$ROOT" && cargo metadata --locked --format-version 1 --no-default-features --features "pg$PG_MAJOR") \
    | python3 -c '
import json, pathlib, shutil, sys
wanted = set(open(sys.argv[1]).read().split("\n"))
out = pathlib.Path(sys.argv[2])
out.mkdir()
without = []
for p in json.load(sys.stdin)["packages"]:
    crate, version = p["name"], p["version"]
    name = f"{crate} v{version}"
    if name not in wanted or p["source"] is None:  # None: this crate itself
        continue
    src = pathlib.Path(p["manifest_path"]).parent
    notices = sorted(f for f in src.iterdir() if f.is_file()
                     and f.name.upper().startswith(("LICENSE", "LICENCE", "COPYING", "NOTICE", "COPYRIGHT")))
    if not notices:
        without.append(name + ": " + str(p["license"]))
        continue
    dest = out / f"{crate}-{version}"
    dest.mkdir(parents=True)
    for f in notices:
        shutil.copyfile(f, dest / f.name)
(out / "README").write_text(
    "The licence and notice files of the Rust crates linked into webhook_dedup.so,\n"
    "as each crate publishes them. These crates publish none; the licence their\n"
    "Cargo.toml names (SPDX) applies:\n" + "".join(f"  {w}\n" for w in sorted(without)))
' "$stage/crates" "$doc/third-party"
# Debian Policy 4.4: the changelog's format; its date is RFC 5322 (git's %cD).
{
    echo "$pkg ($version) unstable; urgency=medium"
    echo
    echo "  * webhook_dedup $version, built by scripts/package.sh"
    echo "    from commit $commit."
    echo
    echo " -- $maintainer  $(git -C "$ROOT" log -1 --format=%cD HEAD)"
} | gzip -9n > "$doc/changelog.gz"

# Debian Policy 10.9: directories 0755, files 0644; 8.1: shared libraries
# are not executable.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f -exec chmod 0644 {} +
find "$root" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

# The shared libraries the .so needs, as the package names and minimum
# versions that provide them (dpkg-shlibdeps(1); it reads debian/control
# from its working directory, so it gets a minimal one).
log "4/7 dependencies (dpkg-shlibdeps) and the control file"
mkdir -p "$stage/shlibs/debian"
printf 'Source: webhook-dedup\n\nPackage: %s\nArchitecture: any\n' "$pkg" > "$stage/shlibs/debian/control"
shlibs=$(cd "$stage/shlibs" && dpkg-shlibdeps -O -e"$lib" 2>"$stage/shlibdeps.log") \
    || { cat "$stage/shlibdeps.log" >&2; die "dpkg-shlibdeps failed"; }
shlibs=${shlibs#shlibs:Depends=}
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no dependency of $(basename "$lib") (expected at least libc6)"

# The binary package's control file: Debian Policy 5.3 lists its fields,
# 5.6 defines them (Installed-Size in KiB, 5.6.20; the Description's
# synopsis and long lines, 5.6.13).
# Installed-Size as dpkg-gencontrol counts it (/usr/bin/dpkg-gencontrol,
# dpkg 1.21): each file's size rounded up to KiB, 1 KiB per directory; not
# du, whose blocks depend on the file system the stage is on.
installed_size=$(find "$root" -path "$root/DEBIAN" -prune -o \( -type f -printf 'f %s\n' \) -o -printf 'd 0\n' \
    | awk '{ kib += ($1 == "f") ? int(($2 + 1023) / 1024) : 1 } END { print kib }')
mkdir -m 0755 "$root/DEBIAN"
(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
{
    echo "Package: $pkg"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $installed_size"
    echo "Depends: postgresql-$PG_MAJOR, $shlibs"
    echo "Section: database"
    echo "Priority: optional"
    echo "Description: $synopsis"
    fold -s -w 72 <<<"$description" | sed 's/ *$//; s/^/ /'
    echo " ."
    fold -s -w 72 <<<"This package is built for PostgreSQL $PG_MAJOR. Add webhook_dedup to shared_preload_libraries (for the metrics and the background worker; restart the server), then run CREATE EXTENSION webhook_dedup in the receiver's database." \
        | sed 's/ *$//; s/^/ /'
} > "$root/DEBIAN/control"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

# dpkg-deb takes the ar member dates from SOURCE_DATE_EPOCH (exported
# above) and clamps the tar entries' mtimes to it; it sorts the entries by
# name and records them as root:root. xz with one thread: dpkg-deb uses
# liblzma's multi-threaded encoder when it may use more than one thread (by
# default as many as there are CPUs), and "files created in single-threaded
# mode won't be identical to files created in multi-threaded mode" (xz(1),
# --block-size: only the latter store sizes in block headers), so the bytes
# would depend on the builder's CPU count (dpkg-deb(1): --threads-max, since
# dpkg 1.21.9; measured: xz -T1 and -T2 differ, -T2 and -T4 do not).
log "5/7 dpkg-deb --build $(basename "$deb")"
rm -f "$deb"
dpkg-deb --root-owner-group -Zxz --threads-max=1 --build "$root" "$deb" >/dev/null
log "6/7 git archive $(basename "$tarball") (HEAD, $(git -C "$ROOT" rev-parse --short HEAD))"
git -C "$ROOT" archive --format=tar.gz --prefix="webhook_dedup-$version/" -o "$tarball" HEAD

log "7/7 the SQL edition: webhook_dedup-tle--$version.sql (pg_tle) and webhook_dedup-sql--$version.sql (psql -f)"
build_sql_edition "$extdir/webhook_dedup--$version.sql" "$stage/sql-edition" >/dev/null
sed 's/^[^:]*: /  /' "$stage/sql-edition/assemble.log" >&2
cp "$stage/sql-edition/webhook_dedup-tle--$version.sql" "$stage/sql-edition/webhook_dedup-sql--$version.sql" "$out/"

# The flat apt repository (--repo): the package copied in, then its indexes
# made again from every .deb there. Packages by dpkg-scanpackages (dpkg-dev;
# --multiversion keeps every version there), Packages.gz beside it, and a
# Release listing both with their sizes and hashes (Debian's repository
# format: apt checks each index it downloads against Release); its Date is
# HEAD's commit time, so the same packages give the same bytes.
if [ -n "$repo" ]; then
    log "the apt repository $repo: $(basename "$deb") added, Packages and Release made again"
    mkdir -p "$repo"
    cp "$deb" "$repo/"
    (
        cd "$repo"
        dpkg-scanpackages --multiversion . /dev/null 2>/dev/null > Packages
        [ -s Packages ] || die "dpkg-scanpackages found no package in $repo"
        gzip -9n < Packages > Packages.gz
        {
            echo "Origin: webhook_dedup"
            echo "Label: webhook_dedup"
            echo "Suite: stable"
            echo "Date: $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
            echo "Architectures: $(sed -n 's/^Architecture: //p' Packages | LC_ALL=C sort -u | paste -sd' ')"
            echo "Description: webhook_dedup for PostgreSQL $(sed -n 's/^Package: postgresql-\([0-9]*\)-webhook-dedup$/\1/p' Packages | LC_ALL=C sort -nu | paste -sd' ')"
            for sum in MD5Sum:md5sum SHA256:sha256sum; do
                echo "${sum%%:*}:"
                for f in Packages Packages.gz; do
                    printf ' %s %s %s\n' "$(${sum#*:} "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "$f"
                done
            done
        } > Release
    )
fi

if command -v lintian >/dev/null; then
    log "lintian $(basename "$deb") (information only)"
    lintian --tag-display-limit 0 "$deb" >&2 || true
fi
printf '%s\n' "$deb" "$tarball" "$out/webhook_dedup-tle--$version.sql" "$out/webhook_dedup-sql--$version.sql"
