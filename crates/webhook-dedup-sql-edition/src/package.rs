//! The SQL edition's release artifacts, around the assembled install
//! script ([`crate::assemble`]):
//!
//! - `webhook_dedup-tle--<version>.sql`: the roles, then
//!   `pgtle.install_extension('webhook_dedup', <version>, ..., <script>,
//!   ARRAY['pgcrypto'])`, after which `CREATE EXTENSION webhook_dedup`
//!   works where pg_tle is (AWS RDS and Aurora, Supabase). pg_tle stores
//!   the script and runs it at `CREATE EXTENSION` as an extension script
//!   (pg_tle's docs, "pgtle.install_extension").

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
    if !Regex::new(r"^[0-9]+\.[0-9]+\.[0-9]+$").unwrap().is_match(version) {
        return Err(AssembleError(format!("version {version:?} is not <major>.<minor>.<patch>")));
    }
    let roles = roles_block(script)?;
    Ok(format!(
        "-- webhook_dedup {version}, SQL edition, for pg_tle (Trusted Language Extensions: AWS RDS and Aurora,\n\
         -- Supabase). Written by crates/webhook-dedup-sql-edition from the native edition's install script and\n\
         -- editions/sql: do not edit. Run it as a member of pgtle_admin in the database, with pgcrypto\n\
         -- available, then CREATE EXTENSION webhook_dedup; docs/sql-edition.md.\n\
         \\set ON_ERROR_STOP on\n\
         BEGIN;\n\
         -- The extension's group roles, first: cluster-wide, created when missing (the extension script\n\
         -- grants to them and checks them again).\n\
         {roles}\n\
         SELECT pgtle.install_extension(\n  'webhook_dedup',\n  '{version}',\n  '{description}',\n\
         {TLE_QUOTE}\n{script}{TLE_QUOTE},\n  ARRAY['pgcrypto']\n);\n\
         COMMIT;\n",
        description = DESCRIPTION.replace('\'', "''"),
    ))
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
        assert!(t.contains(&format!("{TLE_QUOTE}\n{SCRIPT}{TLE_QUOTE},\n  ARRAY['pgcrypto']\n);\nCOMMIT;\n")));
        assert!(t.contains("'Webhook signature verification, idempotency keys"));
    }

    #[test]
    fn a_script_holding_the_quote_or_a_bad_version_is_refused() {
        assert!(tle(&format!("{SCRIPT}{TLE_QUOTE}"), "0.4.0").is_err());
        assert!(tle(SCRIPT, "0.4").is_err());
        assert!(tle(SCRIPT, "0.4.0'; DROP").is_err());
        assert!(tle("CREATE SCHEMA x;", "0.4.0").is_err());
    }
}
