//! The documentation against the catalog: the README lists every function
//! the extension installs (see `src/tests/mod.rs` for how these tests run).

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// The README's function list and the catalog agree.
    #[pg_test]
    fn readme_lists_every_function() {
        let readme = include_str!("../../README.md");
        let in_catalog: Vec<String> = Spi::connect(|client| {
            client
                .select(
                    "SELECT DISTINCT CASE WHEN n.nspname = 'webhook_dedup' THEN 'webhook_dedup.' ELSE '' END || p.proname
                       FROM pg_depend d
                       JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                       JOIN pg_namespace n ON n.oid = p.pronamespace
                       JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
                      WHERE e.extname = 'webhook_dedup' AND d.deptype = 'e'
                        AND n.nspname <> 'tests' -- the pg_test build's own test functions
                      ORDER BY 1",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect()
        });
        assert!(in_catalog.len() >= 7, "{in_catalog:?}");
        for name in &in_catalog {
            assert!(readme.contains(&format!("`{name}(")), "README does not list {name}");
        }
    }
}
