//! Kept SPI plans, executed with an explicitly chosen snapshot.
//!
//! pgrx's SPI wrappers pick `read_only` from whether the transaction has an
//! XID yet, which decides which snapshot a statement sees. The claim path
//! needs to decide that itself:
//! - the look-up of a key after its lock is taken runs on the **latest**
//!   snapshot ([`Snap::Latest`]), so it sees a row committed while this
//!   backend waited for the lock, in every isolation level;
//! - writes run on the statement snapshot SPI takes for a non-read-only
//!   statement ([`Snap::Statement`]): a fresh one under READ COMMITTED, the
//!   transaction's under REPEATABLE READ / SERIALIZABLE, so PostgreSQL's
//!   own update-conflict checks apply there.
//!
//! Every statement is prepared once per backend and kept (`SPI_keepplan`);
//! the plan cache re-plans it after DDL. Statements run through a [`Conn`],
//! which only exists inside [`connected`], and the [`Rows`] they return
//! borrow it, so no row can be read after `SPI_finish` freed it.

use crate::error::Raise;
use pgrx::pg_sys;
use pgrx::{FromDatum, IntoDatum};
use std::cell::Cell;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::jsonb::Jsonb;

/// A statement prepared on first use and kept for the backend's life.
pub struct Statement {
    sql: std::borrow::Cow<'static, CStr>,
    argtypes: &'static [pg_sys::Oid],
    /// The names of the columns it returns, when callers read them by
    /// position ([`Rows::get`]): checked against the statement's result
    /// once per backend, so a `.sql` file and the Rust that reads it cannot
    /// drift apart silently.
    columns: &'static [&'static str],
    checked: Cell<bool>,
    plan: Cell<Option<NonNull<pg_sys::_SPI_plan>>>,
    /// Whether the kept plan was prepared for custom plans
    /// (`CURSOR_OPT_CUSTOM_PLAN`, see [`Statement::plan`]).
    custom: Cell<bool>,
    /// Whether the statement asks for the generic plan from the first
    /// execution (`CURSOR_OPT_GENERIC_PLAN`; [`Statement::generic_plan`]).
    generic: bool,
    /// Whether every execution is planned for its arguments
    /// (`CURSOR_OPT_CUSTOM_PLAN`; [`Statement::custom_plan`]).
    always_custom: bool,
    /// Whether it names a shard relation instead of a Citus table
    /// ([`Statement::on_relation`]): no Citus plan cache is involved, so
    /// its plans are kept as on one server.
    on_shard: bool,
}

thread_local! {
    /// The statements made by [`Statement::on_relation`], by (statement,
    /// relation oid).
    static ON_RELATIONS: std::cell::RefCell<std::collections::HashMap<(usize, u32), std::rc::Rc<Statement>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Drop the statements [`Statement::on_relation`] made, and free their
/// plans: called when the shards' metadata may have changed (a relation
/// cache invalidation of the distributed table), so that a backend keeps
/// the statements of the shards it uses now, not of every shard it ever
/// held.
pub fn forget_relations() {
    let kept = ON_RELATIONS.with_borrow_mut(std::mem::take);
    for statement in kept.values() {
        if let Some(plan) = statement.plan.take() {
            // SAFETY: a plan the statement kept (SPI_keepplan); nothing else
            // refers to it, and no execution of it is running (the caller
            // is between statements).
            unsafe { pg_sys::SPI_freeplan(plan.as_ptr()) };
        }
    }
}

/// How many statements on shard relations a backend keeps (each holds its
/// text and its plan: a node holds a few dozen shards of a table).
const ON_RELATIONS_KEPT: usize = 256;

// SAFETY: a Postgres backend runs its extension code on one thread; the
// Cell is never touched from another thread (pgrx's thread check enforces
// that SPI is only used from the main thread).
unsafe impl Sync for Statement {}

impl Statement {
    pub const fn new(sql: &'static CStr, argtypes: &'static [pg_sys::Oid]) -> Self {
        Statement {
            sql: std::borrow::Cow::Borrowed(sql),
            argtypes,
            columns: &[],
            checked: Cell::new(true),
            plan: Cell::new(None),
            custom: Cell::new(false),
            generic: false,
            always_custom: false,
            on_shard: false,
        }
    }

    /// A statement whose result columns are read by position: `columns`
    /// are their names, in order (a prefix of the result is enough).
    pub const fn returning(
        sql: &'static CStr,
        argtypes: &'static [pg_sys::Oid],
        columns: &'static [&'static str],
    ) -> Self {
        Statement {
            sql: std::borrow::Cow::Borrowed(sql),
            argtypes,
            columns,
            checked: Cell::new(false),
            plan: Cell::new(None),
            custom: Cell::new(false),
            generic: false,
            always_custom: false,
            on_shard: false,
        }
    }

    /// The same statement, always run with its generic plan (unless custom
    /// plans are forced: [`Statement::plan`]). For statements whose generic
    /// plan is the custom plan's shape but whose estimate PostgreSQL's plan
    /// cache rates higher, so that it would plan every execution afresh: a
    /// `LIMIT $n` (a generic plan assumes a tenth of the rows) on an index
    /// scan in the `ORDER BY`'s order. Measured on the outbox's take: a
    /// custom plan per call cost about 5% of the sender's CPU in the
    /// planner (docs/benchmarks.md).
    pub const fn generic_plan(mut self) -> Self {
        self.generic = true;
        self
    }

    /// The same statement, planned afresh for the arguments of every
    /// execution: for a rare statement whose arguments choose between
    /// conditions (`$1 IS NULL OR ...`), so that each execution's plan keeps
    /// only the conditions it was given and uses their indexes (a generic
    /// plan would keep them all). `webhook_dedup.redact`'s scopes.
    pub const fn custom_plan(mut self) -> Self {
        self.always_custom = true;
        self
    }

    /// This statement with `table` (schema-qualified, as its SQL names it)
    /// replaced by the relation `relid`, a shard of that table on this
    /// node (the local-shard fast path, `crate::store::local_shard`): the
    /// same SQL on the shard, planned by PostgreSQL alone (a shard is not a
    /// Citus table) and kept like every statement, one per relation, until
    /// [`forget_relations`]. None when the backend keeps
    /// [`ON_RELATIONS_KEPT`] already, or `relid` is gone: the caller runs
    /// the statement on `table`.
    pub fn on_relation(&'static self, table: &str, relid: pg_sys::Oid) -> Option<std::rc::Rc<Statement>> {
        let key = (self as *const Statement as usize, relid.to_u32());
        if let Some(kept) = ON_RELATIONS.with_borrow(|kept| kept.get(&key).cloned()) {
            return Some(kept);
        }
        if ON_RELATIONS.with_borrow(|kept| kept.len()) >= ON_RELATIONS_KEPT {
            return None;
        }
        // SAFETY: catalog look-ups by oid (NULL for a relation that is
        // gone); quote_identifier returns its argument or a palloc'd copy.
        let name = unsafe {
            let rel = pg_sys::get_rel_name(relid);
            let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
            if rel.is_null() || schema.is_null() {
                return None;
            }
            format!(
                "{}.{}",
                CStr::from_ptr(pg_sys::quote_identifier(schema)).to_str().ok()?,
                CStr::from_ptr(pg_sys::quote_identifier(rel)).to_str().ok()?
            )
        };
        let sql = replace_table(self.sql.to_str().ok()?, table, &name)?;
        let statement = std::rc::Rc::new(Statement {
            sql: std::borrow::Cow::Owned(std::ffi::CString::new(sql).ok()?),
            argtypes: self.argtypes,
            columns: self.columns,
            checked: Cell::new(self.columns.is_empty()),
            plan: Cell::new(None),
            custom: Cell::new(false),
            generic: self.generic,
            always_custom: self.always_custom,
            on_shard: true,
        });
        ON_RELATIONS.with_borrow_mut(|kept| kept.insert(key, statement.clone()));
        Some(statement)
    }

    /// Check the result's column names against `columns` (once).
    fn check_columns(&self, table: *mut pg_sys::SPITupleTable) {
        if self.checked.get() || table.is_null() {
            return;
        }
        // SAFETY: a tuple table SPI just returned, in the current SPI
        // connection; SPI_fname returns a palloc'd copy (or NULL for a bad
        // column number, which the count check rules out).
        let names: Vec<String> = unsafe {
            let desc = (*table).tupdesc;
            let count = (*desc).natts as usize;
            (1..=count.min(self.columns.len()))
                .map(|i| {
                    let name = pg_sys::SPI_fname(desc, i as i32);
                    if name.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(name).to_string_lossy().into_owned()
                    }
                })
                .collect()
        };
        if names != self.columns {
            pgrx::error!(
                "webhook_dedup: statement returns columns {names:?}, the code reads {:?}: {:?}",
                self.columns,
                self.sql
            );
        }
        self.checked.set(true);
    }

    /// The kept plan, prepared on first use. Where the extension's tables
    /// are Citus tables on a Citus whose generic plans grow the backend
    /// with every execution (`crate::citus::plans_must_be_custom`:
    /// citusdata/citus#8783), it is prepared with `CURSOR_OPT_CUSTOM_PLAN`,
    /// so that PostgreSQL's plan cache plans every execution afresh and
    /// frees the plan after it instead of reusing a generic one; and it is
    /// prepared again when that answer changes (`distribute()` ran while
    /// this backend had its plans).
    fn plan(&self, _conn: &Conn<'_>) -> NonNull<pg_sys::_SPI_plan> {
        let custom = self.always_custom || (!self.on_shard && crate::citus::plans_must_be_custom());
        if let Some(plan) = self.plan.get() {
            if self.custom.get() == custom {
                return plan;
            }
            // SAFETY: a plan this statement kept; nothing else refers to it.
            unsafe { pg_sys::SPI_freeplan(plan.as_ptr()) };
            self.plan.set(None);
        }
        check_version();
        let options = if custom {
            pg_sys::CURSOR_OPT_CUSTOM_PLAN as i32
        } else if self.generic {
            pg_sys::CURSOR_OPT_GENERIC_PLAN as i32
        } else {
            0
        };
        // SAFETY: inside an SPI connection (a Conn exists); the argtypes
        // slice outlives the call; SPI_prepare_cursor copies what it needs.
        let plan = unsafe {
            pg_sys::SPI_prepare_cursor(
                self.sql.as_ptr(),
                self.argtypes.len() as i32,
                self.argtypes.as_ptr().cast_mut(),
                options,
            )
        };
        let Some(plan) = NonNull::new(plan) else {
            // SAFETY: SPI_result is set by the failed SPI_prepare.
            let code = unsafe { pg_sys::SPI_result };
            pgrx::error!("webhook_dedup: SPI_prepare failed ({code}) for: {:?}", self.sql);
        };
        // SAFETY: the plan was just prepared in this SPI connection; keeping
        // moves it under CacheMemoryContext so it survives SPI_finish.
        unsafe { pg_sys::SPI_keepplan(plan.as_ptr()) };
        self.plan.set(Some(plan));
        self.custom.set(custom);
        plan
    }
}

thread_local! {
    /// Whether this backend found its SQL objects at the library's version.
    static VERSION_CHECKED: Cell<bool> = const { Cell::new(false) };
}

/// The first column of the first row of a read-only query (`None` for no
/// row or NULL); an error is raised as `webhook_dedup: reading <what>: ...`.
///
/// Read through pgrx's read-only client: `Spi::get_one` and every
/// `SpiClient::update` mark the transaction as writing by taking a
/// transaction id (pgrx's `mark_mutable`), which a standby refuses (XX000
/// "cannot assign TransactionIds during recovery") and which costs a
/// transaction id (and a commit record) on the primary for a call that
/// writes nothing. Every read the extension makes outside its kept
/// statements goes through here.
pub fn select_one<T: FromDatum + IntoDatum>(what: &str, query: &str) -> Option<T> {
    pgrx::spi::Spi::connect(|client| client.select(query, Some(1), &[])?.first().get_one::<T>())
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: reading {what}: {e}"))
}

/// The version of the extension's SQL objects in this database, if it is
/// installed (`pg_extension.extversion`).
pub fn installed_version() -> Option<String> {
    select_one(
        "pg_extension",
        "SELECT (SELECT e.extversion FROM pg_catalog.pg_extension AS e
                  WHERE e.extname OPERATOR(pg_catalog.=) 'webhook_dedup')",
    )
}

/// Before this backend prepares its first statement: the SQL objects must
/// be those of this library's version, or every statement would fail on
/// a table of another shape. 55000 with the fix otherwise (after a new
/// library is installed and the server restarted, until `ALTER EXTENSION
/// webhook_dedup UPDATE` runs; docs/operations.md, "Upgrading").
fn check_version() {
    if VERSION_CHECKED.get() {
        return;
    }
    let library = env!("CARGO_PKG_VERSION");
    if let Some(installed) = installed_version() {
        if installed != library {
            crate::error::Error::NotInPrerequisiteState {
                message: format!(
                    "webhook_dedup's SQL objects in this database are version {installed}, its library is {library}"
                ),
                hint: Some("Run ALTER EXTENSION webhook_dedup UPDATE (docs/operations.md, \"Upgrading\").".into()),
            }
            .raise();
        }
    }
    VERSION_CHECKED.set(true);
}

/// Which snapshot a statement runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snap {
    /// SPI's own choice for a non-read-only statement.
    Statement,
    /// `GetLatestSnapshot()`: everything committed so far, plus this
    /// transaction's own earlier writes.
    Latest,
}

/// An open SPI connection; see [`connected`].
pub struct Conn<'c> {
    _connection: PhantomData<&'c ()>,
}

/// Run `body` inside an SPI connection. What `body` returns cannot borrow
/// the connection, so rows never outlive it.
pub fn connected<R>(body: impl for<'c> FnOnce(&Conn<'c>) -> R) -> R {
    pgrx::spi::Spi::connect(|_client| body(&Conn { _connection: PhantomData }))
}

/// The rows a statement returned (or affected), valid while its connection is.
pub struct Rows<'c> {
    table: *mut pg_sys::SPITupleTable,
    count: usize,
    _connection: PhantomData<&'c ()>,
}

impl Rows<'_> {
    /// Rows returned by a query, or affected by a write without RETURNING.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Column `column` (1-based) of row `row` (0-based).
    pub fn get<T: FromDatum>(&self, row: usize, column: i32) -> Option<T> {
        assert!(row < self.count && !self.table.is_null(), "row {row} out of range");
        // SAFETY: the table belongs to the current SPI connection and `row`
        // is in range; SPI_getbinval checks the column number (raising an
        // ERROR on a bad one, never reading out of bounds).
        unsafe {
            let table = &*self.table;
            let tuple = *table.vals.add(row);
            let mut is_null = false;
            let datum = pg_sys::SPI_getbinval(tuple, table.tupdesc, column, &mut is_null);
            let typoid = pg_sys::SPI_gettypeid(table.tupdesc, column);
            T::from_polymorphic_datum(datum, is_null, typoid)
        }
    }

    /// A `jsonb` column, detoasted and copied into the memory context that
    /// was current when the connection opened (the caller's), so it
    /// outlives the connection.
    pub fn get_jsonb(&self, row: usize, column: i32) -> Option<Jsonb> {
        assert!(row < self.count && !self.table.is_null(), "row {row} out of range");
        // SAFETY: as in `get`; the column is asserted to be jsonb before its
        // datum is treated as a varlena; pg_detoast_datum_packed returns the
        // datum itself or a copy in the SPI context, and SPI_datumTransfer
        // copies a by-reference varlena (typByVal false, typLen -1) into the
        // upper executor context.
        unsafe {
            let table = &*self.table;
            assert_eq!(pg_sys::SPI_gettypeid(table.tupdesc, column), pg_sys::JSONBOID, "column {column} is not jsonb");
            let tuple = *table.vals.add(row);
            let mut is_null = false;
            let datum = pg_sys::SPI_getbinval(tuple, table.tupdesc, column, &mut is_null);
            if is_null {
                return None;
            }
            let detoasted = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            let copied = pg_sys::SPI_datumTransfer(pg_sys::Datum::from(detoasted), false, -1);
            Some(Jsonb::from_raw(copied))
        }
    }
}

/// An argument for a statement parameter.
pub fn arg<T: IntoDatum>(value: T) -> Option<pg_sys::Datum> {
    value.into_datum()
}

impl<'c> Conn<'c> {
    /// Execute `statement` with `args` (one per parameter, `None` for NULL).
    /// Errors raised by the statement propagate as Postgres ERRORs.
    pub fn execute(&self, statement: &Statement, args: &[Option<pg_sys::Datum>], snap: Snap) -> Rows<'c> {
        execute(self, statement, args, snap)
    }
}

fn execute<'c>(conn: &Conn<'c>, statement: &Statement, args: &[Option<pg_sys::Datum>], snap: Snap) -> Rows<'c> {
    assert_eq!(args.len(), statement.argtypes.len(), "wrong argument count for {:?}", statement.sql);
    let plan = statement.plan(conn);
    // plan_cache_mode = force_generic_plan (a role's or a session's
    // setting) overrides CURSOR_OPT_CUSTOM_PLAN in PostgreSQL's
    // choose_custom_plan: where custom plans are needed, the setting is
    // made `auto` for this execution and put back after it (the guard
    // restores it on an ERROR too, which pgrx unwinds as a panic).
    let _auto = statement.custom.get().then(PlanCacheModeAuto::enter);
    let mut values: Vec<pg_sys::Datum> = args.iter().map(|a| a.unwrap_or(pg_sys::Datum::from(0))).collect();
    let nulls: Vec<std::ffi::c_char> = args.iter().map(|a| if a.is_some() { b' ' as _ } else { b'n' as _ }).collect();
    // SAFETY: inside an SPI connection (conn); `values`/`nulls` have one entry per
    // plan argument and live across the call; a null snapshot pointer means
    // "SPI's choice" (InvalidSnapshot); GetLatestSnapshot returns a valid
    // static snapshot that SPI copies (read_only = false) before use.
    unsafe {
        pg_sys::SPI_tuptable = std::ptr::null_mut();
        let snapshot = match snap {
            Snap::Statement => std::ptr::null_mut(),
            Snap::Latest => pg_sys::GetLatestSnapshot(),
        };
        let status = pg_sys::SPI_execute_snapshot(
            plan.as_ptr(),
            values.as_mut_ptr(),
            nulls.as_ptr(),
            snapshot,
            std::ptr::null_mut(),
            false,
            true,
            0,
        );
        if status < 0 {
            pgrx::error!("webhook_dedup: SPI_execute_snapshot failed ({status}) for: {:?}", statement.sql);
        }
        statement.check_columns(pg_sys::SPI_tuptable);
        Rows { table: pg_sys::SPI_tuptable, count: pg_sys::SPI_processed as usize, _connection: PhantomData }
    }
}

/// `plan_cache_mode` set to `auto` while it lives, if it was
/// `force_generic_plan` (see [`execute`]).
struct PlanCacheModeAuto(Option<std::ffi::c_int>);

impl PlanCacheModeAuto {
    fn enter() -> PlanCacheModeAuto {
        // SAFETY: a backend-global GUC variable, read and written on the
        // backend's one thread.
        unsafe {
            let was = pg_sys::plan_cache_mode;
            if was == pg_sys::PlanCacheMode::PLAN_CACHE_MODE_FORCE_GENERIC_PLAN as std::ffi::c_int {
                pg_sys::plan_cache_mode = pg_sys::PlanCacheMode::PLAN_CACHE_MODE_AUTO as std::ffi::c_int;
                return PlanCacheModeAuto(Some(was));
            }
        }
        PlanCacheModeAuto(None)
    }
}

impl Drop for PlanCacheModeAuto {
    fn drop(&mut self) {
        if let Some(was) = self.0 {
            // SAFETY: as in `enter`.
            unsafe { pg_sys::plan_cache_mode = was };
        }
    }
}

/// `sql` with every mention of the table `table` (schema-qualified: a
/// mention is `table` not followed by a character of an identifier)
/// replaced by `by`; None when it does not mention it.
fn replace_table(sql: &str, table: &str, by: &str) -> Option<String> {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    let mut found = false;
    while let Some(at) = rest.find(table) {
        let after = &rest[at + table.len()..];
        let whole = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$');
        out.push_str(&rest[..at]);
        out.push_str(if whole { by } else { table });
        found |= whole;
        rest = after;
    }
    out.push_str(rest);
    found.then_some(out)
}

/// The text of `src/sql/statements/<file>` as a `&'static CStr`, checked at
/// compile time (the SQL of every kept statement lives in a `.sql` file).
#[macro_export]
macro_rules! sql_statement {
    ($file:literal) => {
        match ::std::ffi::CStr::from_bytes_with_nul(
            concat!(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/sql/statements/", $file)), "\0").as_bytes(),
        ) {
            Ok(sql) => sql,
            Err(_) => panic!(concat!($file, " contains a NUL byte")),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::replace_table;

    #[test]
    fn a_table_is_replaced_where_it_is_named_whole() {
        let sql = "INSERT INTO webhook_dedup.replay_guards AS g (source) VALUES ($1)\n\
                   ON CONFLICT DO NOTHING; SELECT * FROM webhook_dedup.replay_guards_x, webhook_dedup.replay_guards";
        assert_eq!(
            replace_table(sql, "webhook_dedup.replay_guards", "webhook_dedup.replay_guards_102040").as_deref(),
            Some(
                "INSERT INTO webhook_dedup.replay_guards_102040 AS g (source) VALUES ($1)\n\
                 ON CONFLICT DO NOTHING; SELECT * FROM webhook_dedup.replay_guards_x, webhook_dedup.replay_guards_102040"
            )
        );
        assert_eq!(replace_table("SELECT 1 FROM webhook_dedup.keys", "webhook_dedup.replay_guards", "x"), None);
        assert_eq!(
            replace_table("SELECT 1 FROM webhook_dedup.replay_guards2", "webhook_dedup.replay_guards", "x"),
            None
        );
    }
}
