//! `#[pg_test]`s of `webhook_dedup.source_node` on one server (src/api/
//! routing.rs): no row (every call goes to this server), and its argument
//! errors. On Citus it names the node that holds a source's shard:
//! `tests/citus/test_local_shard.py`; its roles are
//! `tests/cluster/test_security.py`.

#[pgrx::pg_schema]
mod tests {
    use crate::tests::support::error_of;
    use crate::tests::support::i64_of;
    use pgrx::prelude::*;

    #[pg_test]
    fn source_node_answers_no_node_on_one_server() {
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.source_node('github')"), 0);
        Spi::run("SELECT webhook_dedup.webhook_claim('github', 'k')").unwrap();
        assert_eq!(i64_of("SELECT count(*) FROM webhook_dedup.source_node('github')"), 0);
    }

    #[pg_test]
    fn source_node_refuses_bad_sources() {
        for (sql, expected) in [
            ("SELECT * FROM webhook_dedup.source_node(NULL)", "22004: source must not be NULL"),
            ("SELECT * FROM webhook_dedup.source_node('')", "22023: source must not be empty"),
            (
                "SELECT * FROM webhook_dedup.source_node(repeat('x', 256))",
                "22023: source is 256 characters long; the limit is 255",
            ),
            ("SELECT * FROM webhook_dedup.source_node('(overflow)')", "22023: source \"(overflow)\" is reserved"),
        ] {
            let got = error_of(sql);
            assert!(got.starts_with(expected), "{sql}: {got}");
        }
    }
}
