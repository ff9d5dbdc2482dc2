//! The SQL edition's function bodies (`editions/sql/*.sql`) and its
//! internal helpers (`editions/sql/internal/*.sql`), read from files.
//!
//! A body file holds the bodies of the functions of one concern, named as
//! `src/api/` names its files (`key.sql` beside `src/api/key.rs`). Each
//! body starts with a marker line naming the function and, optionally, its
//! language (PL/pgSQL unless it says `sql`):
//!
//! ```sql
//! --@ webhook_dedup.webhook_key
//! DECLARE
//!   ...
//! BEGIN
//!   ...
//! END
//! ```
//!
//! and runs to the next marker or the end of the file. Everything of the
//! function but its body (name, arguments with their names and defaults,
//! return type, volatility) comes from the native edition's install script
//! ([`crate::assemble`]): the two editions cannot disagree on a signature.
//! Lines before the first marker are the file's own comment.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A function body's language: what `LANGUAGE` the assembled function
/// declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    PlPgSql,
    Sql,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::PlPgSql => "plpgsql",
            Language::Sql => "sql",
        }
    }
}

/// One function's body, and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub language: Language,
    pub text: String,
    pub file: PathBuf,
    pub line: usize,
}

/// What a body file or directory got wrong, with the file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError(pub String);

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const MARKER: &str = "--@ ";
const SCHEMA: &str = "webhook_dedup.";

/// The bodies of one file's text, by function name (without the schema).
/// Errors: a marker without a `webhook_dedup.` name, an unknown language,
/// an empty body, a function given twice.
pub fn parse(text: &str, file: &Path) -> Result<BTreeMap<String, Body>, BodyError> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, Body)> = None;
    let at = |line: usize| format!("{}:{}", file.display(), line);
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix(MARKER) {
            if let Some(done) = current.take() {
                finish(&mut out, done, &at)?;
            }
            let mut words = rest.split_whitespace();
            let name = words
                .next()
                .and_then(|w| w.strip_prefix(SCHEMA))
                .filter(|w| {
                    !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                })
                .ok_or_else(|| BodyError(format!("{}: a marker names webhook_dedup.<function>: {line:?}", at(n))))?;
            let language = match words.next() {
                None | Some("plpgsql") => Language::PlPgSql,
                Some("sql") => Language::Sql,
                Some(other) => return Err(BodyError(format!("{}: unknown language {other:?}", at(n)))),
            };
            if let Some(extra) = words.next() {
                return Err(BodyError(format!("{}: unexpected {extra:?} after the language", at(n))));
            }
            current =
                Some((name.to_string(), Body { language, text: String::new(), file: file.to_path_buf(), line: n }));
        } else if let Some((_, body)) = current.as_mut() {
            body.text.push_str(line);
            body.text.push('\n');
        }
    }
    if let Some(done) = current.take() {
        finish(&mut out, done, &at)?;
    }
    Ok(out)
}

fn finish(
    out: &mut BTreeMap<String, Body>,
    (name, mut body): (String, Body),
    at: &dyn Fn(usize) -> String,
) -> Result<(), BodyError> {
    body.text = body.text.trim_end().to_string() + "\n";
    if body.text.trim().is_empty() {
        return Err(BodyError(format!("{}: webhook_dedup.{name} has an empty body", at(body.line))));
    }
    if body.text.contains(crate::assemble::QUOTE) {
        return Err(BodyError(format!(
            "{}: webhook_dedup.{name}'s body contains {}, the quote the assembler puts around it",
            at(body.line),
            crate::assemble::QUOTE
        )));
    }
    if let Some(first) = out.get(&name) {
        return Err(BodyError(format!(
            "{}: webhook_dedup.{name} is given twice (first at {}:{})",
            at(body.line),
            first.file.display(),
            first.line
        )));
    }
    out.insert(name, body);
    Ok(())
}

/// The helpers' file of grants, assembled after the others.
const PRIVILEGES: &str = "privileges.sql";

/// The helpers: each file's path and text (whole statements).
pub type Helpers = Vec<(PathBuf, String)>;

/// Every body of the `*.sql` files directly in `dir` (sorted by file
/// name), and the text of every `*.sql` file in `dir/internal` (the
/// helpers, in file-name order, but `privileges.sql` last: its grants
/// name the helpers of every other file).
pub fn read_dir(dir: &Path) -> Result<(BTreeMap<String, Body>, Helpers), BodyError> {
    let list = |d: &Path| -> Result<Vec<PathBuf>, BodyError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(|e| BodyError(format!("{}: {e}", d.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        Ok(files)
    };
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| BodyError(format!("{}: {e}", p.display())));
    let mut bodies = BTreeMap::new();
    for file in list(dir)? {
        for (name, body) in parse(&read(&file)?, &file)? {
            if let Some(first) = bodies.get(&name) {
                let first: &Body = first;
                return Err(BodyError(format!(
                    "{}:{}: webhook_dedup.{name} is given twice (first at {}:{})",
                    file.display(),
                    body.line,
                    first.file.display(),
                    first.line
                )));
            }
            bodies.insert(name, body);
        }
    }
    let internal = dir.join("internal");
    let mut helpers = Vec::new();
    if internal.is_dir() {
        let mut files = list(&internal)?;
        files.sort_by_key(|f| f.file_name().is_some_and(|n| n == PRIVILEGES));
        for file in files {
            let text = read(&file)?;
            helpers.push((file, text));
        }
    }
    Ok((bodies, helpers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<BTreeMap<String, Body>, BodyError> {
        parse(text, Path::new("key.sql"))
    }

    #[test]
    fn bodies_run_from_their_marker_to_the_next() {
        let b = p("-- the file's comment\n--@ webhook_dedup.a\nBEGIN\n  RETURN 1;\nEND\n\n--@ webhook_dedup.b sql\nSELECT 2\n")
            .unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b["a"].text, "BEGIN\n  RETURN 1;\nEND\n");
        assert_eq!(b["a"].language, Language::PlPgSql);
        assert_eq!(b["a"].line, 2);
        assert_eq!(b["b"].text, "SELECT 2\n");
        assert_eq!(b["b"].language, Language::Sql);
    }

    #[test]
    fn a_bad_marker_a_duplicate_or_an_empty_body_is_refused_with_its_line() {
        for (text, says) in [
            ("--@ a\nBEGIN END\n", "key.sql:1: a marker names"),
            ("--@ webhook_dedup.A\nBEGIN END\n", "key.sql:1: a marker names"),
            ("--@ webhook_dedup.a perl\nx\n", "key.sql:1: unknown language \"perl\""),
            ("--@ webhook_dedup.a sql x\nx\n", "key.sql:1: unexpected \"x\""),
            ("--@ webhook_dedup.a\n\n  \n--@ webhook_dedup.b\nx\n", "key.sql:1: webhook_dedup.a has an empty body"),
            (
                "--@ webhook_dedup.a\nx\n--@ webhook_dedup.a\ny\n",
                "key.sql:3: webhook_dedup.a is given twice (first at key.sql:1)",
            ),
            ("--@ webhook_dedup.a\nSELECT $webhook_dedup$x$webhook_dedup$\n", "contains $webhook_dedup$"),
        ] {
            let e = p(text).unwrap_err().0;
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }
}
