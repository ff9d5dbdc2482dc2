//! The SQL edition's release artifacts, around the assembled install
//! script ([`crate::assemble`]):
//!
//! - `webhook_dedup-tle--<version>.sql`: the roles, then
//!   `pgtle.install_extension('webhook_dedup', <version>, ..., <script>)`,
//!   after which `CREATE EXTENSION webhook_dedup` works where pg_tle is
//!   (AWS RDS and Aurora, Supabase). pg_tle stores the script and runs it
//!   at `CREATE EXTENSION` as an extension script (pg_tle's docs,
//!   "pgtle.install_extension"). It requires no other extension: SHA-256
//!   and SHA-512 are PostgreSQL's own `sha256()` and `sha512()`, and only
//!   the HMAC-SHA1 schemes look for pgcrypto, when called (the PyPI builds
//!   of PostgreSQL 16 and 18 have no pgcrypto at all).
//! - `webhook_dedup-sql--<version>.sql`: for `psql -f` where there is no
//!   pg_tle (Google Cloud SQL and AlloyDB, Azure, Neon): the same script
//!   run as plain SQL in one transaction, without the extension's
//!   bookkeeping (`pg_extension_config_dump`, which works only in an
//!   extension script: a plain schema's tables are all dumped), recording
//!   its version in `webhook_dedup._sql_edition_version()`. Idempotent: run
//!   again at the same version it does nothing; over another version, or
//!   where webhook_dedup is an extension, it refuses and changes nothing.

use regex::Regex;

use crate::assemble::AssembleError;

/// The dollar quote around the script given to `pgtle.install_extension`,
/// as pg_tle's own examples write it.
pub const TLE_QUOTE: &str = "$_pgtle_$";

/// The extension's one-line description, as `pgtle.available_extensions()`
/// shows it.
pub const DESCRIPTION: &str = "Webhook signature verification, idempotency keys and an at-least-once claim state \
                               machine inside PostgreSQL (SQL edition)";

/// The native script's block that creates the extension's group roles when
/// missing (privileges.sql): the `DO $$ ... $$;` holding `CREATE ROLE`.
/// The pg_tle artifact runs it before `pgtle.install_extension`, so that
/// the roles exist before the extension script that grants to them.
pub fn roles_block(script: &str) -> Result<&str, AssembleError> {
    let create = script
        .find("EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);")
        .ok_or_else(|| AssembleError("the script creates no role (privileges.sql's block)".into()))?;
    let start = script[..create]
        .rfind("\nDO $$\n")
        .map(|i| i + 1)
        .ok_or_else(|| AssembleError("the roles are not created in a DO block".into()))?;
    let end = script[create..]
        .find("\n$$;\n")
        .map(|i| create + i + "\n$$;".len())
        .ok_or_else(|| AssembleError("the roles' DO block does not end".into()))?;
    Ok(&script[start..end])
}

/// The pg_tle artifact of `script` (an assembled install script) at
/// `version`. Errors: a script holding [`TLE_QUOTE`], a version pg_tle
/// would not take.
pub fn tle(script: &str, version: &str) -> Result<String, AssembleError> {
    if script.contains(TLE_QUOTE) {
        return Err(AssembleError(format!("the script contains {TLE_QUOTE}, the quote around it")));
    }
    check_version(version)?;
    let roles = roles_block(script)?;
    Ok(format!(
        "-- webhook_dedup {version}, SQL edition, for pg_tle (Trusted Language Extensions: AWS RDS and Aurora,\n\
         -- Supabase). Written by crates/webhook-dedup-sql-edition from the native edition's install script and\n\
         -- editions/sql: do not edit. Run it as a member of pgtle_admin in the database, then\n\
         -- CREATE EXTENSION webhook_dedup (and CREATE EXTENSION pgcrypto for the HMAC-SHA1 schemes);\n\
         -- docs/sql-edition.md.\n\
         \\set ON_ERROR_STOP on\n\
         BEGIN;\n\
         -- The extension's group roles, first: cluster-wide, created when missing (the extension script\n\
         -- grants to them and checks them again).\n\
         {roles}\n\
         SELECT pgtle.install_extension(\n  'webhook_dedup',\n  '{version}',\n  '{description}',\n\
         {TLE_QUOTE}\n{script}{TLE_QUOTE}\n);\n\
         COMMIT;\n",
        description = DESCRIPTION.replace('\'', "''"),
    ))
}

/// The `psql -f` artifact of `script` (an assembled install script) at
/// `version` (see the module's documentation). Errors: a version that is
/// not `<major>.<minor>.<patch>`, a script without the config-dump block
/// it leaves out.
pub fn psql(script: &str, version: &str) -> Result<String, AssembleError> {
    check_version(version)?;
    let dump = Regex::new(r"(?m)^SELECT pg_catalog\.pg_extension_config_dump\('[a-z_.]+', ''\);\n").unwrap();
    if !dump.is_match(script) {
        return Err(AssembleError("the script registers no table for pg_dump (pg_extension_config_dump)".into()));
    }
    let plain = dump.replace_all(script, "");
    Ok(format!(
        "-- webhook_dedup {version}, SQL edition, for psql -f (where there is no pg_tle: Google Cloud SQL and\n\
         -- AlloyDB, Azure Database for PostgreSQL, Neon). Written by crates/webhook-dedup-sql-edition from the\n\
         -- native edition's install script and editions/sql: do not edit. Run it with psql -f, as a role that may\n\
         -- create roles and schemas, in a UTF8 database (pgcrypto for the HMAC-SHA1 schemes); docs/sql-edition.md.\n\
         \\set ON_ERROR_STOP on\n\
         SELECT EXISTS (SELECT FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'webhook_dedup')\n\
         \x20        AS webhook_dedup_extension,\n\
         \x20      pg_catalog.to_regprocedure('webhook_dedup._sql_edition_version()') IS NOT NULL AS webhook_dedup_installed\n\
         \\gset\n\
         \\if :webhook_dedup_extension\n\
         DO $$ BEGIN RAISE EXCEPTION 'webhook_dedup is installed in this database as an extension'\n\
         \x20 USING ERRCODE = 'object_not_in_prerequisite_state',\n\
         \x20       HINT = 'Update it with ALTER EXTENSION webhook_dedup UPDATE, not with this file.'; END $$;\n\
         \\endif\n\
         \\if :webhook_dedup_installed\n\
         SELECT webhook_dedup._sql_edition_version() OPERATOR(pg_catalog.=) '{version}' AS webhook_dedup_current \\gset\n\
         \\if :webhook_dedup_current\n\
         \\echo webhook_dedup {version} (SQL edition) is installed in this database already: nothing to do\n\
         \\quit\n\
         \\endif\n\
         DO $$ BEGIN RAISE EXCEPTION 'webhook_dedup % (SQL edition) is installed in this database, not {version}',\n\
         \x20 webhook_dedup._sql_edition_version() USING ERRCODE = 'object_not_in_prerequisite_state',\n\
         \x20 HINT = 'Run the upgrade scripts webhook_dedup-sql--<from>--<to>.sql from that version on.'; END $$;\n\
         \\endif\n\
         BEGIN;\n\
         -- As CREATE EXTENSION runs a script (extension.c, execute_extension_script): function bodies\n\
         -- are checked when called, not here (a body may name a helper made further down), and only\n\
         -- warnings are shown. Every object is named schema-qualified, so no search_path is needed.\n\
         SET LOCAL check_function_bodies = off;\n\
         SET LOCAL client_min_messages = warning;\n\
         SET LOCAL search_path = pg_catalog, pg_temp;\n\
         {plain}\n\
         -- The version this database holds (a psql -f install has no pg_extension row to say it).\n\
         CREATE FUNCTION webhook_dedup._sql_edition_version() RETURNS text\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\nRETURN '{version}';\n\
         REVOKE ALL ON FUNCTION webhook_dedup._sql_edition_version() FROM PUBLIC;\n\
         COMMIT;\n"
    ))
}

/// `version` as pg_tle and the file names take it: `<major>.<minor>.<patch>`.
fn check_version(version: &str) -> Result<(), AssembleError> {
    if Regex::new(r"^[0-9]+\.[0-9]+\.[0-9]+$").unwrap().is_match(version) {
        Ok(())
    } else {
        Err(AssembleError(format!("version {version:?} is not <major>.<minor>.<patch>")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "CREATE SCHEMA webhook_dedup;\n-- roles\nDO $$\nDECLARE\n  r text;\nBEGIN\n  \
        FOREACH r IN ARRAY ARRAY['a'] LOOP\n    EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);\n  \
        END LOOP;\nEND\n$$;\nGRANT a TO b;\n";

    #[test]
    fn the_roles_block_is_the_do_block_around_create_role() {
        let b = roles_block(SCRIPT).unwrap();
        assert!(b.starts_with("DO $$\nDECLARE"));
        assert!(b.ends_with("END\n$$;"));
        assert!(!b.contains("GRANT"));
    }

    #[test]
    fn the_tle_artifact_creates_the_roles_then_installs_the_script() {
        let t = tle(SCRIPT, "0.4.0").unwrap();
        let roles = t.find("CREATE ROLE %I NOLOGIN").unwrap();
        let install = t.find("SELECT pgtle.install_extension(\n  'webhook_dedup',\n  '0.4.0',").unwrap();
        assert!(roles < install);
        assert!(t.contains(&format!("{TLE_QUOTE}\n{SCRIPT}{TLE_QUOTE}\n);\nCOMMIT;\n")));
        // no extension required: the SHA-1 schemes find pgcrypto when called
        assert!(!t.contains("ARRAY['pgcrypto']"));
        assert!(t.contains("'Webhook signature verification, idempotency keys"));
    }

    #[test]
    fn the_psql_artifact_runs_the_script_once_without_the_extension_bookkeeping() {
        let script =
            format!("{SCRIPT}SELECT pg_catalog.pg_extension_config_dump('webhook_dedup.keys', '');\nSELECT 1;\n");
        let p = psql(&script, "0.4.0").unwrap();
        assert!(!p.contains("pg_extension_config_dump"));
        let begin = p.find("\nBEGIN;\n").unwrap();
        let checks_off = p.find("SET LOCAL check_function_bodies = off;").unwrap();
        assert!(begin < checks_off && checks_off < p.find("CREATE SCHEMA webhook_dedup;").unwrap());
        let version = p.find("CREATE FUNCTION webhook_dedup._sql_edition_version()").unwrap();
        assert!(begin < version && p.ends_with("COMMIT;\n"));
        // refused over an extension or another version, nothing done at this one, before the transaction
        for guard in ["\\if :webhook_dedup_extension", "\\if :webhook_dedup_current\n\\echo", "not 0.4.0'"] {
            assert!(p.find(guard).unwrap() < begin, "{guard}");
        }
        assert!(psql(SCRIPT, "0.4.0").is_err(), "a script registering no table is not the extension's");
        assert!(psql(&script, "4").is_err());
    }

    #[test]
    fn a_script_holding_the_quote_or_a_bad_version_is_refused() {
        assert!(tle(&format!("{SCRIPT}{TLE_QUOTE}"), "0.4.0").is_err());
        assert!(tle(SCRIPT, "0.4").is_err());
        assert!(tle(SCRIPT, "0.4.0'; DROP").is_err());
        assert!(tle("CREATE SCHEMA x;", "0.4.0").is_err());
    }
}
