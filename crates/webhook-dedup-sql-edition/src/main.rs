//! `webhook-dedup-sql-edition`: writes webhook_dedup's SQL edition
//! (docs/sql-edition.md) from the native edition's install script.
//!
//! ```text
//! webhook-dedup-sql-edition assemble NATIVE.sql BODIES_DIR OUT.sql [--allow-missing]
//!     the install script: NATIVE.sql (the native edition's
//!     webhook_dedup--<version>.sql) with every function written in Rust
//!     given its body from BODIES_DIR (editions/sql), and the native store's
//!     statements (src/sql/statements, found from BODIES_DIR) as functions
//!     _s_<name>; --allow-missing gives
//!     a function without one a body raising 0A000 (an edition being
//!     built) and lists them on stderr
//! webhook-dedup-sql-edition tle EDITION.sql VERSION OUT.sql
//!     the pg_tle artifact (webhook_dedup-tle--<version>.sql) of an
//!     assembled script
//! webhook-dedup-sql-edition psql EDITION.sql VERSION OUT.sql
//!     the psql -f artifact (webhook_dedup-sql--<version>.sql) of an
//!     assembled script
//! ```
//!
//! Exit status 0, or 1 with the reason on stderr (a body for no native
//! function, a missing body, a file that cannot be read).

mod assemble;
mod bodies;
mod data;
mod package;
mod statements;

use std::path::Path;
use std::process::ExitCode;

fn run(args: &[String]) -> Result<(), String> {
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let write = |p: &str, text: &str| std::fs::write(p, text).map_err(|e| format!("{p}: {e}"));
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["assemble", native, dir, out, rest @ ..] => {
            let missing = match rest {
                [] => assemble::Missing::Refuse,
                ["--allow-missing"] => assemble::Missing::Raise,
                _ => return Err(format!("assemble: unexpected {rest:?}")),
            };
            // the repository: editions/sql's grandparent
            let root = Path::new(dir).join("../..");
            let native = read(native)?;
            let (mut bodies, mut helpers) = bodies::read_dir(Path::new(dir)).map_err(|e| e.0)?;
            helpers.insert(0, data::helpers());
            let stmts = statements::read(&root)?;
            let text: String = stmts.values().map(statements::function).collect::<Vec<_>>().join("\n");
            helpers.insert(1, (Path::new("src/sql/statements").to_path_buf(), text));
            for (name, body) in data::bodies() {
                if let Some(written) = bodies.get(&name) {
                    return Err(format!(
                        "{}:{}: webhook_dedup.{name} is generated from the core (src/data.rs), not written",
                        written.file.display(),
                        written.line
                    ));
                }
                bodies.insert(name, body);
            }
            let a = assemble::assemble(&native, &bodies, &helpers, missing).map_err(|e| e.0)?;
            write(out, &a.script)?;
            eprintln!(
                "{out}: {} functions from editions/sql, {} not written yet{}",
                a.implemented.len(),
                a.missing.len(),
                if a.missing.is_empty() { String::new() } else { format!(": {}", a.missing.join(", ")) }
            );
            Ok(())
        }
        ["tle", edition, version, out] => write(out, &package::tle(&read(edition)?, version).map_err(|e| e.0)?),
        ["psql", edition, version, out] => write(out, &package::psql(&read(edition)?, version).map_err(|e| e.0)?),
        _ => Err(USAGE.into()),
    }
}

const USAGE: &str =
    "usage: webhook-dedup-sql-edition assemble NATIVE.sql BODIES_DIR OUT.sql [--allow-missing]\n       \
                     webhook-dedup-sql-edition tle EDITION.sql VERSION OUT.sql\n       \
                     webhook-dedup-sql-edition psql EDITION.sql VERSION OUT.sql";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("webhook-dedup-sql-edition: {e}");
            ExitCode::FAILURE
        }
    }
}
