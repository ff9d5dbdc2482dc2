#!/usr/bin/env bash
# The store is the only layer that touches the tables (docs/design.md,
# "Layout"): what the compiler does not check, this does, with grep. Fails,
# naming file:line, when
#   1. `Col::` (a column of the keys table, written directly) appears in a
#      .rs file of src/ outside src/store/;
#   2. a statement is prepared outside src/store/ (`Statement::new(`,
#      `Statement::returning(` or `sql_statement!(`; src/spi.rs, which
#      defines them, excepted);
#   3. a file of src/ outside src/store/ imports the direct writes' `Col` or
#      `Values` (or all of a `store::direct...` module with `*`);
#   4. a statement file src/sql/statements/<name>.sql is not prepared by
#      exactly one file of src/store/, or its name does not start with that
#      file's: `<file>_<what>.sql` (`claim.rs` prepares `claim_upsert.sql`),
#      the longest file name that fits being the one meant
#      (`claim_counts_upsert.sql` is `claim_counts.rs`'s), a directory's
#      `mod.rs` named after the directory, and `src/store/mod.rs`, the key
#      store itself, `key` (`key_read.sql`).
# Whole-line comments (`//`, `///`, `//!`) are not code and are skipped.
# Run by the lint layer of the test command (scripts/test.sh).
#
# Usage: scripts/check-layers.sh [TREE]   (TREE: a checkout, default this one)
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"
[ -d src/store ] && [ -d src/sql/statements ] || { echo "check-layers: no src/store or src/sql/statements in $PWD" >&2; exit 2; }

failures=0
report() { # file:line: message
    printf '%s\n' "$1"
    failures=$((failures + 1))
}

# The .rs files of src/ outside src/store/, one a line.
outside_store() {
    find src -path src/store -prune -o -type f -name '*.rs' -print | LC_ALL=C sort
}

# grep -nE over files, whole-line comments dropped: "file:line:text".
code_grep() {
    local pattern=$1
    shift
    [ $# -gt 0 ] || return 0
    grep -HnE -- "$pattern" "$@" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true
}

mapfile -t outside < <(outside_store)

# 1. key columns written outside the store
while IFS= read -r hit; do
    [ -n "$hit" ] && report "${hit%%:*}:$(cut -d: -f2 <<<"$hit"): Col:: outside src/store/ (only the store writes the keys table's columns)"
done < <(code_grep '(^|[^A-Za-z0-9_])Col::' "${outside[@]}")

# 2. statements prepared outside the store
prepare='Statement::(new|returning)[[:space:]]*\(|sql_statement![[:space:]]*\('
mapfile -t not_spi < <(printf '%s\n' "${outside[@]}" | grep -vx 'src/spi.rs' || true)
while IFS= read -r hit; do
    [ -n "$hit" ] && report "${hit%%:*}:$(cut -d: -f2 <<<"$hit"): a statement prepared outside src/store/ (move it into the store file of its table)"
done < <(code_grep "$prepare" "${not_spi[@]}")

# 3. the direct writes' Col and Values imported outside the store: each
# `use` statement read whole (it may span lines), reported at its first line
if [ ${#outside[@]} -gt 0 ]; then
    while IFS= read -r hit; do
        [ -n "$hit" ] && report "$hit: imports the direct writes' Col or Values outside src/store/"
    done < <(awk '
        FNR == 1 { text = ""; start = 0 }
        start == 0 && /^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?use[[:space:]]/ { start = FNR; text = "" }
        start > 0 {
            text = text " " $0
            if (index($0, ";") > 0) {
                if (text ~ /store::direct[A-Za-z_]*/ &&
                    (text ~ /(^|[^A-Za-z0-9_])(Col|Values)([^A-Za-z0-9_]|$)/ || text ~ /direct[A-Za-z_]*::(\{[^}]*)?\*/))
                    print FILENAME ":" start
                start = 0
            }
        }
        /store::direct[A-Za-z_]*::(Col|Values)([^A-Za-z0-9_]|$)/ && !/^[[:space:]]*\/\// && !/^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?use[[:space:]]/ {
            print FILENAME ":" FNR
        }
    ' "${outside[@]}")
fi

# 4. every statement file prepared by one store file, and named after it
mapfile -t store < <(find src/store -type f -name '*.rs' | LC_ALL=C sort)
declare -A stem_of=()   # store file -> the prefix of its statements
for file in "${store[@]}"; do
    name=$(basename "$file" .rs)
    if [ "$name" = mod ]; then
        if [ "$file" = src/store/mod.rs ]; then name=key; else name=$(basename "$(dirname "$file")"); fi
    fi
    stem_of[$file]=$name
done

declare -A prepared_by=() where=()
while IFS= read -r hit; do
    [ -n "$hit" ] || continue
    file=${hit%%:*}
    line=$(cut -d: -f2 <<<"$hit")
    # every sql_statement!("...") of the line
    while IFS= read -r statement; do
        [ -n "$statement" ] || continue
        if [ ! -f "src/sql/statements/$statement" ]; then
            report "$file:$line: sql_statement!(\"$statement\"): no such file in src/sql/statements/"
            continue
        fi
        case " ${prepared_by[$statement]:-} " in
            *" $file "*) ;;
            *) prepared_by[$statement]="${prepared_by[$statement]:-} $file"; where[$statement]="${where[$statement]:-} $file:$line" ;;
        esac
    done < <(grep -oE 'sql_statement![[:space:]]*\("[^"]+"' <<<"${hit#*:*:}" | sed -E 's/.*\("//; s/"$//')
done < <(code_grep 'sql_statement!' "${store[@]}")

for path in src/sql/statements/*.sql; do
    [ -e "$path" ] || continue
    statement=$(basename "$path")
    read -r -a files <<<"${prepared_by[$statement]:-}"
    if [ ${#files[@]} -eq 0 ]; then
        report "$path:1: prepared by no file of src/store/ (prepare it there, or delete it)"
        continue
    fi
    if [ ${#files[@]} -gt 1 ]; then
        report "$path:1: prepared by several files of src/store/:${where[$statement]} (one file owns a statement)"
        continue
    fi
    # the store file its name points to: the longest prefix `<stem>_`
    owner='' owner_stem=''
    for file in "${store[@]}"; do
        stem=${stem_of[$file]}
        if [[ $statement == "${stem}_"* ]] && [ ${#stem} -gt ${#owner_stem} ]; then
            owner=$file owner_stem=$stem
        fi
    done
    if [ "$owner" != "${files[0]}" ]; then
        named=''
        [ -z "$owner" ] || named=" (as named, it belongs to $owner)"
        report "${where[$statement]# }: prepares $statement, whose name is not this file's: name it ${stem_of[${files[0]}]}_<what>.sql$named"
    fi
done

if [ "$failures" -gt 0 ]; then
    echo "check-layers: $failures finding(s) above; the rules are in scripts/check-layers.sh and docs/design.md, \"Layout\"" >&2
    exit 1
fi
echo "check-layers: the statements ($(find src/sql/statements -name '*.sql' | wc -l)) and the key columns are the store's alone"
