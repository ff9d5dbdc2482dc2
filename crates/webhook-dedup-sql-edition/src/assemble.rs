//! The SQL edition's install script, made from the native edition's.
//!
//! The native install script (`webhook_dedup--<version>.sql`, written by
//! pgrx from `src/sql/*.sql` and the `#[pg_extern]` signatures) holds the
//! schema, tables, indexes, views, roles, grants and comments, and one
//! `CREATE FUNCTION ... LANGUAGE c AS 'MODULE_PATHNAME', '<symbol>'` per
//! function implemented in Rust. The SQL edition is the same script with
//! each of those `LANGUAGE c` clauses replaced by the body of
//! `editions/sql` ([`crate::bodies`]) and the SQL edition's internal
//! helpers inserted before the script's last part (the comments, which
//! pgrx runs last): one schema, two implementations, only function bodies
//! differ.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use regex::Regex;

use crate::bodies::Body;

/// The dollar quote around every body. A body may not contain it
/// ([`crate::bodies::parse`] refuses one that does).
pub const QUOTE: &str = "$webhook_dedup$";

/// A function of the native script implemented in Rust: its SQL name and
/// where its `LANGUAGE c ... ;` clause is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CFunction {
    pub name: String,
    pub symbol: String,
    /// Byte range of the `LANGUAGE c ... ;` clause in the native script.
    pub clause: std::ops::Range<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleError(pub String);

impl fmt::Display for AssembleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The functions of `native` written in Rust, in script order. Each
/// `LANGUAGE c` clause belongs to the nearest `CREATE FUNCTION` before it;
/// its name is that statement's (quoted by pgrx or not). Errors: a clause
/// with no `CREATE FUNCTION webhook_dedup.` before it, a name given twice
/// (an overload: bodies are found by name).
pub fn c_functions(native: &str) -> Result<Vec<CFunction>, AssembleError> {
    let clause = Regex::new(r"LANGUAGE c(?: /\* Rust \*/)?\s+AS 'MODULE_PATHNAME', '([A-Za-z0-9_]+)';").unwrap();
    let create = Regex::new(r#"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+webhook_dedup\."?([a-z0-9_]+)"?\s*\("#).unwrap();
    let mut out: Vec<CFunction> = Vec::new();
    let mut seen = BTreeSet::new();
    for m in clause.captures_iter(native) {
        let whole = m.get(0).unwrap();
        let name =
            create.captures_iter(&native[..whole.start()]).last().map(|c| c[1].to_string()).ok_or_else(|| {
                AssembleError(format!("a LANGUAGE c clause at byte {} has no CREATE FUNCTION", whole.start()))
            })?;
        if !seen.insert(name.clone()) {
            return Err(AssembleError(format!(
                "webhook_dedup.{name} is written in Rust twice (an overload): bodies are found by name"
            )));
        }
        out.push(CFunction { name, symbol: m[1].to_string(), clause: whole.range() });
    }
    Ok(out)
}

/// What to do about a function of the native script without a body in
/// `editions/sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Refuse to assemble (a release).
    Refuse,
    /// Give it a body that raises SQLSTATE 0A000 naming the function (an
    /// edition being built: its tests say which functions are not there).
    Raise,
}

/// The SQL edition's install script and what went into it.
#[derive(Debug)]
pub struct Assembled {
    pub script: String,
    /// The functions given an `editions/sql` body.
    pub implemented: Vec<String>,
    /// The functions given the 0A000 body ([`Missing::Raise`]).
    pub missing: Vec<String>,
}

/// The finalize block of the native script: pgrx puts `comments.sql`
/// (`finalize`) last; helpers go just before it, after every table, view
/// and grant exists, so an SQL-language helper is checked against them.
const FINALIZE_MARK: &str = "-- finalize\n";

/// `native` with each `LANGUAGE c` clause replaced by its body from
/// `bodies`, and `helpers` (whole statements) inserted before the finalize
/// block. Errors: a body for a function the native script does not write
/// in Rust (a typo, or a function gone), a missing body under
/// [`Missing::Refuse`], a script with no finalize block, anything left that
/// names the native library.
pub fn assemble(
    native: &str,
    bodies: &BTreeMap<String, Body>,
    helpers: &[(std::path::PathBuf, String)],
    missing: Missing,
) -> Result<Assembled, AssembleError> {
    let functions = c_functions(native)?;
    let names: BTreeSet<&str> = functions.iter().map(|f| f.name.as_str()).collect();
    if let Some((extra, body)) = bodies.iter().find(|(n, _)| !names.contains(n.as_str())) {
        return Err(AssembleError(format!(
            "{}:{}: webhook_dedup.{extra} has a body but the native edition has no such function in Rust",
            body.file.display(),
            body.line
        )));
    }
    let absent: Vec<String> =
        functions.iter().filter(|f| !bodies.contains_key(&f.name)).map(|f| f.name.clone()).collect();
    if missing == Missing::Refuse && !absent.is_empty() {
        return Err(AssembleError(format!("no body in editions/sql for: {}", absent.join(", "))));
    }
    let mut script = String::with_capacity(native.len() * 2);
    let mut at = 0;
    for f in &functions {
        script.push_str(&native[at..f.clause.start]);
        match bodies.get(&f.name) {
            Some(body) => {
                let from = format!("{}:{}", body.file.display(), body.line);
                script.push_str(&format!(
                    "LANGUAGE {} /* SQL edition: {from} */\nAS {QUOTE}\n{}{QUOTE};",
                    body.language.name(),
                    body.text
                ));
            }
            None => script.push_str(&format!(
                "LANGUAGE plpgsql /* SQL edition: not written yet */\nAS {QUOTE}\nBEGIN\n  RAISE EXCEPTION \
                 'webhook_dedup.{0} is not in the SQL edition yet: use the native edition'\n    USING ERRCODE = \
                 'feature_not_supported';\nEND\n{QUOTE};",
                f.name
            )),
        }
        at = f.clause.end;
    }
    script.push_str(&native[at..]);
    let finalize = script
        .find(FINALIZE_MARK)
        .and_then(|i| script[..i].rfind("/* <begin connected objects> */"))
        .ok_or_else(|| AssembleError("the native script has no finalize block (comments.sql)".into()))?;
    let mut inserted = String::from("/* <begin connected objects> */\n-- the SQL edition's internal helpers\n");
    for (file, text) in helpers {
        inserted.push_str(&format!("-- {}\n{}\n", file.display(), text.trim_end()));
    }
    inserted.push_str("/* </end connected objects> */\n\n");
    script.insert_str(finalize, &inserted);
    if let Some(i) = script.find("MODULE_PATHNAME") {
        let line = script[..i].lines().count() + 1;
        return Err(AssembleError(format!("line {line} of the SQL edition still names MODULE_PATHNAME")));
    }
    let implemented = functions.iter().filter(|f| bodies.contains_key(&f.name)).map(|f| f.name.clone()).collect();
    Ok(Assembled { script, implemented, missing: absent })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bodies::Language;
    use std::path::PathBuf;

    const NATIVE: &str = "/* <begin connected objects> */\n-- bootstrap\nCREATE SCHEMA webhook_dedup;\n\
        /* </end connected objects> */\n\
        /* <begin connected objects> */\nCREATE  FUNCTION webhook_dedup.\"webhook_key\"(\n\t\"source\" TEXT /* x */\n\
        ) RETURNS TEXT\nIMMUTABLE PARALLEL SAFE\nLANGUAGE c /* Rust */\nAS 'MODULE_PATHNAME', 'webhook_key_wrapper';\n\
        /* </end connected objects> */\n\
        CREATE FUNCTION webhook_dedup.helper_in_sql() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n\
        CREATE FUNCTION webhook_dedup.sources_changed() RETURNS trigger\nLANGUAGE c AS 'MODULE_PATHNAME', 'sources_changed_wrapper';\n\
        /* <begin connected objects> */\n-- src/lib.rs:128\n-- finalize\nCOMMENT ON SCHEMA webhook_dedup IS 'x';\n\
        /* </end connected objects> */\n";

    fn body(text: &str) -> Body {
        Body { language: Language::PlPgSql, text: text.into(), file: PathBuf::from("editions/sql/key.sql"), line: 3 }
    }

    #[test]
    fn the_c_functions_are_found_with_their_names_in_order() {
        let f = c_functions(NATIVE).unwrap();
        let names: Vec<_> = f.iter().map(|f| (f.name.as_str(), f.symbol.as_str())).collect();
        assert_eq!(names, [("webhook_key", "webhook_key_wrapper"), ("sources_changed", "sources_changed_wrapper")]);
    }

    #[test]
    fn each_clause_becomes_its_body_and_the_helpers_go_before_the_finalize_block() {
        let bodies = BTreeMap::from([
            ("webhook_key".to_string(), body("BEGIN\n  RETURN source;\nEND\n")),
            ("sources_changed".to_string(), body("BEGIN\n  RETURN NULL;\nEND\n")),
        ]);
        let helpers = vec![(PathBuf::from("editions/sql/internal/hmac.sql"), "CREATE FUNCTION h() ...;\n".to_string())];
        let a = assemble(NATIVE, &bodies, &helpers, Missing::Refuse).unwrap();
        assert!(a.missing.is_empty());
        assert_eq!(a.implemented, ["webhook_key", "sources_changed"]);
        assert!(a.script.contains(
            ") RETURNS TEXT\nIMMUTABLE PARALLEL SAFE\nLANGUAGE plpgsql /* SQL edition: editions/sql/key.sql:3 */\n\
             AS $webhook_dedup$\nBEGIN\n  RETURN source;\nEND\n$webhook_dedup$;\n"
        ));
        assert!(!a.script.contains("MODULE_PATHNAME"));
        let helper = a.script.find("-- editions/sql/internal/hmac.sql\nCREATE FUNCTION h()").unwrap();
        let finalize = a.script.find("-- finalize").unwrap();
        let last_function = a.script.find("RETURN NULL").unwrap();
        assert!(last_function < helper && helper < finalize);
        // what is not a C function is left as it was
        assert!(a
            .script
            .contains("CREATE FUNCTION webhook_dedup.helper_in_sql() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;"));
    }

    #[test]
    fn a_missing_body_is_refused_or_raises_0a000() {
        let bodies = BTreeMap::from([("webhook_key".to_string(), body("BEGIN RETURN 1; END\n"))]);
        let e = assemble(NATIVE, &bodies, &[], Missing::Refuse).unwrap_err();
        assert_eq!(e.0, "no body in editions/sql for: sources_changed");
        let a = assemble(NATIVE, &bodies, &[], Missing::Raise).unwrap();
        assert_eq!(a.missing, ["sources_changed"]);
        assert!(a
            .script
            .contains("'webhook_dedup.sources_changed is not in the SQL edition yet: use the native edition'"));
        assert!(a.script.contains("ERRCODE = 'feature_not_supported'"));
    }

    #[test]
    fn a_body_for_no_native_function_is_refused() {
        let bodies = BTreeMap::from([("webhook_kye".to_string(), body("x\n"))]);
        let e = assemble(NATIVE, &bodies, &[], Missing::Raise).unwrap_err();
        assert!(e.0.contains("editions/sql/key.sql:3: webhook_dedup.webhook_kye has a body"), "{e}");
    }

    #[test]
    fn an_overload_written_in_rust_is_refused() {
        let twice = format!("{NATIVE}{}", &NATIVE[NATIVE.find("CREATE  FUNCTION").unwrap()..]);
        assert!(c_functions(&twice).unwrap_err().0.contains("webhook_key is written in Rust twice"));
    }
}
