//! The native store's statements (`src/sql/statements/*.sql`), one
//! internal function each in the SQL edition, so that both editions run the
//! same SQL: `webhook_dedup._s_<file name>(<its parameters>)`, its body the
//! file's text, `$1`.. being the function's arguments (PL/pgSQL resolves
//! them so, and caches each statement's plan as the native store's
//! prepared statements are cached).
//!
//! The parameter types come from the store's declaration of the statement
//! (`Statement::new(crate::sql_statement!("<file>"), &[TEXTOID, ...])` in
//! `src/store/`): every statement file must be declared once, with a list
//! of type OIDs this module knows. A statement that returns rows (its main
//! command a `SELECT`, or a data-modifying command with `RETURNING`) gives
//! `SETOF record` (the caller names the columns), the others `void`.
//!
//! A statement that only reads (`reads_only`) is an SQL function, `STABLE`:
//! PostgreSQL inlines it into the calling statement (optimizer/util/
//! clauses.c, inline_set_returning_function: SQL, not STRICT, not
//! VOLATILE, SETOF), so the read is part of its caller's plan, kept by
//! PL/pgSQL, without a function call, an executor of its own and a
//! tuplestore. The others stay PL/pgSQL `VOLATILE`, whose plans are kept
//! for the session: an SQL function that writes is never inlined and would
//! be planned at each call.

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;

/// One statement: its file's name without `.sql`, its parameters' SQL
/// types, its text, and whether it returns rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    pub name: String,
    pub types: Vec<&'static str>,
    pub text: String,
    pub returns_rows: bool,
}

/// The SQL type of a type OID constant of `pgrx::pg_sys`.
fn sql_type(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "TEXTOID" => "text",
        "TIMESTAMPTZOID" => "timestamptz",
        "INT8OID" => "bigint",
        "INT4OID" => "integer",
        "BYTEAOID" => "bytea",
        "INTERVALOID" => "interval",
        "JSONBOID" => "jsonb",
        "UUIDOID" => "uuid",
        "BOOLOID" => "boolean",
        "TEXTARRAYOID" => "text[]",
        "INT8ARRAYOID" => "bigint[]",
        _ => return None,
    })
}

/// `text` without its comment lines, trimmed, without a final `;`.
fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("--")).collect();
    lines.join("\n").trim().trim_end_matches(';').trim_end().to_string()
}

/// Whether a statement returns rows: its main command (the last line that
/// starts, at its first column, with SELECT, INSERT, UPDATE, DELETE or
/// VALUES: the statements write a CTE's body indented) is a SELECT or
/// VALUES, or is followed by a RETURNING at the first column or in it.
pub fn returns_rows(code: &str) -> bool {
    let main = Regex::new(r"(?m)^(SELECT|INSERT|UPDATE|DELETE|VALUES)\b").unwrap();
    let Some(last) = main.find_iter(code).last() else { return false };
    match last.as_str() {
        "SELECT" | "VALUES" => true,
        _ => Regex::new(r"\bRETURNING\b").unwrap().is_match(&code[last.start()..]),
    }
}

/// Whether a statement returning rows only reads: no data-modifying
/// command anywhere (a CTE's included), no row lock (`FOR UPDATE`, `FOR NO
/// KEY UPDATE`, `FOR SHARE`, `FOR KEY SHARE`) and no volatile function
/// the statements use (`clock_timestamp`, `random`, `gen_random_uuid`,
/// `nextval`, `setval`, the advisory locks). Such a statement may be
/// declared STABLE: it sees its caller's snapshot, as a STABLE function
/// must. (Conservative: a word in a string or a name counts too.)
pub fn reads_only(code: &str) -> bool {
    let writes = Regex::new(
        r"(?i)\b(INSERT|UPDATE|DELETE|MERGE|clock_timestamp|random|gen_random_uuid|nextval|setval|pg_advisory\w*|pg_try_advisory\w*)\b|\bFOR\s+(NO\s+KEY\s+UPDATE|KEY\s+SHARE|SHARE)\b",
    )
    .unwrap();
    returns_rows(code) && !writes.is_match(code)
}

/// Every statement of `root` (the repository), by name. Errors: a file
/// without a declaration, one declared twice, a type OID unknown here, a
/// text holding the body's quote.
pub fn read(root: &Path) -> Result<BTreeMap<String, Stmt>, String> {
    let declared = Regex::new(r#"sql_statement!\("([a-z0-9_]+)\.sql"\)\s*,\s*&\[([A-Z0-9_,\s]*)\]"#).unwrap();
    let mut types: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    let mut sources = vec![root.join("src/store")];
    while let Some(dir) = sources.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                sources.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                for m in declared.captures_iter(&text) {
                    let list: Result<Vec<&'static str>, String> = m[2]
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(|t| {
                            sql_type(t).ok_or_else(|| format!("{}: {}.sql: unknown type {t}", path.display(), &m[1]))
                        })
                        .collect();
                    if types.insert(m[1].to_string(), list?).is_some() {
                        return Err(format!("{}.sql is declared twice in src/store", &m[1]));
                    }
                }
            }
        }
    }
    let dir = root.join("src/sql/statements");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".sql")) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if text.contains(crate::assemble::QUOTE) {
            return Err(format!("{}: holds {}", path.display(), crate::assemble::QUOTE));
        }
        let types = types.remove(name).ok_or_else(|| format!("{}: declared nowhere in src/store", path.display()))?;
        let code = code(&text);
        out.insert(
            name.to_string(),
            Stmt { name: name.to_string(), types, returns_rows: returns_rows(&code), text: code },
        );
    }
    if let Some(name) = types.keys().next() {
        return Err(format!("src/store declares {name}.sql, which src/sql/statements does not have"));
    }
    Ok(out)
}

/// The internal function of one statement, revoked from PUBLIC.
pub fn function(s: &Stmt) -> String {
    let q = crate::assemble::QUOTE;
    let args: Vec<String> = s.types.iter().map(|t| t.to_string()).collect();
    let (result, language, body) = if reads_only(&s.text) {
        ("SETOF record", "sql STABLE", format!("{}\n", s.text))
    } else if s.returns_rows {
        ("SETOF record", "plpgsql VOLATILE", format!("BEGIN\n  RETURN QUERY\n{};\nEND\n", s.text))
    } else {
        ("void", "plpgsql VOLATILE", format!("BEGIN\n{};\nEND\n", s.text))
    };
    let signature = format!("webhook_dedup._s_{}({})", s.name, args.join(", "));
    format!(
        "-- src/sql/statements/{name}.sql\nCREATE FUNCTION {signature} RETURNS {result}\n\
         LANGUAGE {language}\nAS {q}\n{body}{q};\nREVOKE ALL ON FUNCTION {signature} FROM PUBLIC;\n",
        name = s.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_returns_rows_by_its_main_command() {
        assert!(returns_rows("SELECT 1"));
        assert!(returns_rows("WITH x AS (\n  DELETE FROM t RETURNING 1\n)\nSELECT count(*) FROM x"));
        assert!(returns_rows("INSERT INTO t VALUES ($1)\nRETURNING a"));
        assert!(returns_rows("UPDATE t SET a = 1\n WHERE b\nRETURNING a"));
        assert!(!returns_rows("WITH x AS (\n  SELECT 1\n)\nINSERT INTO t SELECT * FROM x"));
        assert!(!returns_rows("UPDATE t SET a = 1 WHERE b"));
    }

    #[test]
    fn a_statement_that_only_reads_is_an_sql_function_the_planner_inlines() {
        assert!(reads_only("SELECT a FROM t WHERE b OPERATOR(pg_catalog.=) $1"));
        assert!(!reads_only("SELECT a FROM t WHERE b = $1 FOR UPDATE"));
        assert!(!reads_only("SELECT a FROM t\n   FOR NO KEY UPDATE SKIP LOCKED"));
        assert!(!reads_only("SELECT a FROM t FOR KEY SHARE"));
        assert!(!reads_only("WITH x AS (\n  DELETE FROM t RETURNING 1\n)\nSELECT count(*) FROM x"));
        assert!(!reads_only("SELECT pg_catalog.clock_timestamp()"));
        assert!(!reads_only("SELECT pg_catalog.pg_try_advisory_xact_lock(1)"));
        assert!(!reads_only("UPDATE t SET a = 1\nRETURNING a"));
        assert!(!reads_only("UPDATE t SET a = 1"));
        let read = Stmt {
            name: "r".into(),
            types: vec!["text"],
            text: "SELECT a FROM t WHERE b OPERATOR(pg_catalog.=) $1".into(),
            returns_rows: true,
        };
        let f = function(&read);
        assert!(f.contains("RETURNS SETOF record\nLANGUAGE sql STABLE\n"), "{f}");
        assert!(!f.contains("RETURN QUERY"), "{f}");
    }

    #[test]
    fn every_statement_of_the_repository_is_declared_with_known_types() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let all = read(&root).unwrap();
        assert!(all.len() > 80, "{}", all.len());
        let upsert = &all["claim_upsert"];
        assert_eq!(upsert.types, ["text", "text", "timestamptz", "uuid", "timestamptz", "bytea", "text"]);
        assert!(upsert.returns_rows);
        let f = function(upsert);
        assert!(f.contains(
            "CREATE FUNCTION webhook_dedup._s_claim_upsert(text, text, timestamptz, uuid, timestamptz, bytea, text) \
             RETURNS SETOF record"
        ));
        assert!(f.contains("REVOKE ALL ON FUNCTION webhook_dedup._s_claim_upsert(text, text, timestamptz"));
        assert!(f.contains("LANGUAGE plpgsql VOLATILE"));
        // a source's settings, read on every claim, are inlined
        assert!(reads_only(&all["sources_settings"].text));
        assert!(function(&all["sources_settings"]).contains("LANGUAGE sql STABLE"));
    }
}
