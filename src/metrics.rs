//! Claim counters: aggregated in shared memory, flushed to a table.
//!
//! Every claim call counts one delivery and one outcome for its
//! (database, hour, source, event type). Counting happens in shared memory
//! under one LWLock held for a short, bounded time, as contrib's
//! pg_stat_statements does, because a per-delivery row write would cost a
//! claim far more (an extra insert in the claim transaction cost about 30%
//! of throughput when measured here) and a counter row updated by every
//! claim would serialise the claims of a source behind one row lock until
//! commit (and, taken together with a key's lock, could deadlock).
//!
//! [`flush`] moves the current database's counters into
//! `webhook_dedup.claim_counts` (called by `webhook_dedup.run_maintenance()`);
//! `webhook_dedup.duplicate_metrics` adds the flushed rows and the live ones.
//!
//! What can be lost or misplaced:
//! - counters are not transactional: a rolled-back claim still counted its
//!   delivery (which did happen);
//! - unflushed counts die with a server crash or restart, and a flush whose
//!   transaction aborts loses what it took (at most one flush interval);
//! - a reader that runs while a flush is between taking the counts and
//!   committing them sees neither copy for that moment;
//! - the table holds [`CAPACITY`] entries; past [`MAX_LOAD`] new (hour,
//!   source, event type) entries of a database are counted in one overflow
//!   entry per database and hour, reported with source `(overflow)`; if even
//!   that cannot be stored, the count is dropped and the next flush warns;
//! - so that a flood of made-up sources cannot push real ones into
//!   `(overflow)` (issue 13), one database holds at most [`DATABASE_SHARE`]
//!   entries (the other databases keep the rest), and at most
//!   [`UNCHECKED_SHARE`] of them for sources that are not configured in
//!   `webhook_dedup.sources`: past that, a new entry is made only for a
//!   configured source (looked up, outside the lock, only then), and an
//!   unconfigured one's counts go to the overflow entry; and one source
//!   keeps at most [`SOURCE_EVENT_TYPES`] event types apart per hour, the
//!   others counted as `(other)`. Counting itself
//!   needs the role that may call the counting functions
//!   (`webhook_dedup_receiver` or `webhook_dedup_operator`).
//!
//! Without `shared_preload_libraries` there is no shared memory and nothing
//! is counted (the view shows what was flushed before, if anything).
//!
//! Locking rule: the LWLock is held only to probe the open-addressing table
//! or to copy fixed-size entries into a buffer allocated beforehand; no
//! allocation, SPI or ereport happens under it.

use crate::calendar::align_down;
use crate::claim::Outcome;
use crate::signature::Reason;
use crate::spi::{self, arg, Conn, Snap, Statement};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock};
use std::sync::atomic::{AtomicBool, Ordering};

/// Entries in the shared table.
pub const CAPACITY: usize = 2048;
/// Ordinary entries stop at this load, so every probe ends at an empty slot
/// within a few steps; the rest is headroom for overflow entries.
pub const MAX_LOAD: usize = CAPACITY * 3 / 4;
/// Bytes of a source kept in a metrics entry (longer ones are cut at a
/// character boundary).
pub const SOURCE_BYTES: usize = 128;
/// Bytes of an event type kept in a metrics entry.
pub const EVENT_TYPE_BYTES: usize = 64;
const SLOTS: usize = 32;
const HOUR_US: i64 = 3_600 * 1_000_000;
const MINUTE_US: i64 = 60 * 1_000_000;
/// Minute entries of a database are only created while it holds fewer
/// entries than this (half its share), so they never crowd out its hourly
/// ones, nor another database's.
pub const MINUTE_ROOM: usize = DATABASE_SHARE / 2;
/// Minute entries older than this are useless (the per-minute view shows
/// the last hour, the table keeps two): a flush by any database discards
/// other databases' older ones instead of keeping them.
const MINUTE_KEEP_US: i64 = 2 * HOUR_US;
/// How the overflow entry's source is reported.
pub const OVERFLOW_SOURCE: &str = "(overflow)";
/// Ordinary entries (hours and minutes) one database may hold: a flood in
/// one database leaves the other half of the table to the others.
pub const DATABASE_SHARE: usize = MAX_LOAD / 2;
/// Entries one database may hold for sources it did not check against
/// `webhook_dedup.sources` (made while there was room) or that are not
/// there: a flood of made-up sources stops here, leaving the rest of the
/// database's share to its configured sources.
pub const UNCHECKED_SHARE: usize = MAX_LOAD / 8;

/// Event types one source keeps apart in an hour of one database; the
/// others of that hour are counted as [`OTHER_EVENT_TYPE`].
pub const SOURCE_EVENT_TYPES: usize = 64;
/// The event type counts of a source's further event types go to.
pub const OTHER_EVENT_TYPE: &str = "(other)";

/// Whether the counted source is configured in `webhook_dedup.sources`,
/// as far as the caller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Not looked up (the usual case: the lookup is only needed once the
    /// database's [`UNCHECKED_SHARE`] is used up).
    Unchecked,
    Yes,
    No,
}

/// [`Table::count`] needs to know whether the source is configured: look
/// it up (outside the lock) and count again.
#[derive(Debug, PartialEq, Eq)]
pub struct AskKnown;

/// One counter per column of `webhook_dedup.claim_counts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Deliveries,
    FirstClaims,
    Reclaims,
    DuplicatesOfCompleted,
    DuplicatesInProgress,
    Conflicts,
    RetryLater,
    UnknownOutcome,
    DeadLettered,
    Completions,
    StaleCompletions,
    RetriesScheduled,
    DeadLetters,
    MarkedUnknown,
    Enqueued,
    Drained,
    Forgotten,
    Resolved,
    StaleTokens,
    ExpiredLeases,
    RejectedMissingHeader,
    RejectedMalformedHeader,
    RejectedUnsupportedVersion,
    RejectedNoMatchingSignature,
    RejectedTimestampTooOld,
    RejectedTimestampTooNew,
    MissingEventIds,
    /// `webhook_receive` deliveries answered `ignored` (an event type the
    /// source does not accept).
    Ignored,
    /// `webhook_receive` deliveries the replay guard answered from another
    /// key (a signed body re-sent under a new event id).
    Replayed,
}

impl Counter {
    pub const ALL: [Counter; 29] = [
        Counter::Deliveries,
        Counter::FirstClaims,
        Counter::Reclaims,
        Counter::DuplicatesOfCompleted,
        Counter::DuplicatesInProgress,
        Counter::Conflicts,
        Counter::RetryLater,
        Counter::UnknownOutcome,
        Counter::DeadLettered,
        Counter::Completions,
        Counter::StaleCompletions,
        Counter::RetriesScheduled,
        Counter::DeadLetters,
        Counter::MarkedUnknown,
        Counter::Enqueued,
        Counter::Drained,
        Counter::Forgotten,
        Counter::Resolved,
        Counter::StaleTokens,
        Counter::ExpiredLeases,
        Counter::RejectedMissingHeader,
        Counter::RejectedMalformedHeader,
        Counter::RejectedUnsupportedVersion,
        Counter::RejectedNoMatchingSignature,
        Counter::RejectedTimestampTooOld,
        Counter::RejectedTimestampTooNew,
        Counter::MissingEventIds,
        Counter::Ignored,
        Counter::Replayed,
    ];

    /// The `webhook_dedup.claim_counts` column this counter is flushed to.
    pub fn column(self) -> &'static str {
        match self {
            Counter::Deliveries => "deliveries",
            Counter::FirstClaims => "first_claims",
            Counter::Reclaims => "reclaims",
            Counter::DuplicatesOfCompleted => "duplicates_of_completed",
            Counter::DuplicatesInProgress => "duplicates_in_progress",
            Counter::Conflicts => "conflicts",
            Counter::RetryLater => "retry_later",
            Counter::UnknownOutcome => "unknown_outcome",
            Counter::DeadLettered => "dead_lettered",
            Counter::Completions => "completions",
            Counter::StaleCompletions => "stale_completions",
            Counter::RetriesScheduled => "retries_scheduled",
            Counter::DeadLetters => "dead_letters",
            Counter::MarkedUnknown => "marked_unknown",
            Counter::Enqueued => "enqueued",
            Counter::Drained => "drained",
            Counter::Forgotten => "forgotten",
            Counter::Resolved => "resolved",
            Counter::StaleTokens => "stale_tokens",
            Counter::ExpiredLeases => "expired_leases",
            Counter::RejectedMissingHeader => "rejected_missing_header",
            Counter::RejectedMalformedHeader => "rejected_malformed_header",
            Counter::RejectedUnsupportedVersion => "rejected_unsupported_version",
            Counter::RejectedNoMatchingSignature => "rejected_no_matching_signature",
            Counter::RejectedTimestampTooOld => "rejected_timestamp_too_old",
            Counter::RejectedTimestampTooNew => "rejected_timestamp_too_new",
            Counter::MissingEventIds => "missing_event_ids",
            Counter::Ignored => "ignored",
            Counter::Replayed => "replayed",
        }
    }

    /// The counter of a signature rejection (`None` for `Reason::Ok`).
    pub fn for_rejection(reason: Reason) -> Option<Counter> {
        match reason {
            Reason::Ok => None,
            Reason::MissingHeader => Some(Counter::RejectedMissingHeader),
            Reason::MalformedHeader => Some(Counter::RejectedMalformedHeader),
            Reason::UnsupportedVersion => Some(Counter::RejectedUnsupportedVersion),
            Reason::NoMatchingSignature => Some(Counter::RejectedNoMatchingSignature),
            Reason::TimestampTooOld => Some(Counter::RejectedTimestampTooOld),
            Reason::TimestampTooNew => Some(Counter::RejectedTimestampTooNew),
        }
    }

    /// The counter a claim outcome adds to (besides `Deliveries`).
    pub fn for_outcome(outcome: Outcome) -> Counter {
        match outcome {
            Outcome::Claimed => Counter::FirstClaims,
            Outcome::Reclaimed => Counter::Reclaims,
            Outcome::InProgress => Counter::DuplicatesInProgress,
            Outcome::Duplicate => Counter::DuplicatesOfCompleted,
            Outcome::Conflict => Counter::Conflicts,
            Outcome::RetryLater => Counter::RetryLater,
            Outcome::UnknownOutcome => Counter::UnknownOutcome,
            Outcome::DeadLettered => Counter::DeadLettered,
        }
    }
}

type Counts = [i64; SLOTS];

/// What an entry counts for: an hour of a source and event type, or a
/// minute of a source (all event types).
#[derive(Clone, Copy)]
struct Key {
    database: u32,
    /// Start of the bucket (microseconds since the PostgreSQL epoch).
    bucket: i64,
    /// A minute bucket (event type empty) rather than an hour bucket.
    minute: bool,
    overflow: bool,
    source_len: u8,
    event_type_len: u8,
    source: [u8; SOURCE_BYTES],
    event_type: [u8; EVENT_TYPE_BYTES],
}

impl Key {
    fn new(database: u32, hour: i64, source: &[u8], event_type: &[u8]) -> Key {
        let mut key = Key {
            database,
            bucket: hour,
            minute: false,
            overflow: false,
            source_len: source.len() as u8,
            event_type_len: event_type.len() as u8,
            source: [0; SOURCE_BYTES],
            event_type: [0; EVENT_TYPE_BYTES],
        };
        key.source[..source.len()].copy_from_slice(source);
        key.event_type[..event_type.len()].copy_from_slice(event_type);
        key
    }

    /// The minute entry of `source` (all event types).
    fn minute(database: u32, minute: i64, source: &[u8]) -> Key {
        let mut key = Key::new(database, minute, source, b"");
        key.minute = true;
        key
    }

    /// The overflow entry of this key's database and hour.
    fn overflow(&self) -> Key {
        let mut key = Key::new(self.database, self.bucket, b"", b"");
        key.overflow = true;
        key
    }

    fn source(&self) -> &[u8] {
        &self.source[..usize::from(self.source_len)]
    }

    fn event_type(&self) -> &[u8] {
        &self.event_type[..usize::from(self.event_type_len)]
    }

    fn same(&self, other: &Key) -> bool {
        self.database == other.database
            && self.bucket == other.bucket
            && self.minute == other.minute
            && self.overflow == other.overflow
            && self.source() == other.source()
            && self.event_type() == other.event_type()
    }

    /// FNV-1a over the key, for the probe start.
    fn hash(&self) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let head = self.database.to_le_bytes().into_iter().chain(self.bucket.to_le_bytes());
        let head = head.chain([self.overflow as u8 | (self.minute as u8) << 1]);
        for b in head.chain(self.source().iter().copied()).chain([0xff]).chain(self.event_type().iter().copied()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h as usize
    }
}

#[derive(Clone, Copy)]
struct Entry {
    used: bool,
    /// Made for a source not found in `webhook_dedup.sources` (or not
    /// looked up): counts against the database's [`UNCHECKED_SHARE`].
    unchecked: bool,
    key: Key,
    counts: Counts,
}

impl Entry {
    const EMPTY: Entry = Entry {
        used: false,
        unchecked: false,
        key: Key {
            database: 0,
            bucket: 0,
            minute: false,
            overflow: false,
            source_len: 0,
            event_type_len: 0,
            source: [0; SOURCE_BYTES],
            event_type: [0; EVENT_TYPE_BYTES],
        },
        counts: [0; SLOTS],
    };
}

/// The shared table: open addressing with linear probing, at most
/// [`CAPACITY`] - 1 entries used (so a probe always meets an empty slot);
/// entries are only removed by rebuilding (see [`Table::take`]), so there
/// are no tombstones.
#[derive(Clone, Copy)]
pub struct Table {
    entries: [Entry; CAPACITY],
    used: usize,
    dropped: u64,
    minutes_dropped: u64,
}

impl Default for Table {
    fn default() -> Self {
        Table { entries: [Entry::EMPTY; CAPACITY], used: 0, dropped: 0, minutes_dropped: 0 }
    }
}

// SAFETY: plain old data (integers, booleans and byte arrays), no pointers.
unsafe impl PGRXSharedMemory for Table {}

static TABLE: PgLwLock<Table> = unsafe { PgLwLock::new(c"webhook_dedup_metrics") };
static READY: AtomicBool = AtomicBool::new(false);

/// Request the shared table; called from `_PG_init` while preloading.
pub fn init_shared_memory() {
    pg_shmem_init!(
        TABLE = {
            READY.store(true, Ordering::Release);
            Table::default()
        }
    );
}

/// Whether the shared table exists (the library was preloaded).
pub fn shared() -> bool {
    READY.load(Ordering::Acquire)
}

/// Cut `text` to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> &[u8] {
    if text.len() <= max {
        return text.as_bytes();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text.as_bytes()[..end]
}

impl Table {
    /// The slot holding `key`, or the empty slot where it would go.
    fn probe(&self, key: &Key) -> usize {
        let mut slot = key.hash() % CAPACITY;
        while self.entries[slot].used && !self.entries[slot].key.same(key) {
            slot = (slot + 1) % CAPACITY;
        }
        slot
    }

    /// Add `counts` to `key`'s entry, creating it if there is room; past
    /// [`MAX_LOAD`] the counts go to the overflow entry of the key's
    /// database and hour instead, and when even that cannot be created
    /// they are dropped (and counted as dropped).
    fn add(&mut self, key: &Key, counts: &Counts) {
        self.add_as(key, counts, false);
    }

    /// [`Table::add`], marking a new entry `unchecked`.
    fn add_as(&mut self, key: &Key, counts: &Counts, unchecked: bool) {
        let slot = self.probe(key);
        let room = if key.overflow { CAPACITY - 1 } else { MAX_LOAD };
        if !self.entries[slot].used {
            if self.used >= room {
                if key.overflow {
                    self.dropped += 1;
                } else {
                    self.add(&key.overflow(), counts);
                }
                return;
            }
            self.entries[slot] = Entry { used: true, unchecked, key: *key, counts: [0; SLOTS] };
            self.used += 1;
        }
        for (total, n) in self.entries[slot].counts.iter_mut().zip(counts) {
            *total += n;
        }
    }

    /// Ordinary (not overflow) entries of `database`, and how many of them
    /// are unchecked. A scan of the table, made only when an entry is about
    /// to be created (once per source, event type and bucket between two
    /// flushes).
    fn usage(&self, database: u32) -> (usize, usize) {
        self.entries
            .iter()
            .filter(|e| e.used && e.key.database == database && !e.key.overflow)
            .fold((0, 0), |(all, unchecked), e| (all + 1, unchecked + usize::from(e.unchecked)))
    }

    /// Hour entries of `key`'s database, hour and source (one per event
    /// type); a scan, made only before an entry is created.
    fn event_types(&self, key: &Key) -> usize {
        self.entries
            .iter()
            .filter(|e| {
                e.used
                    && !e.key.minute
                    && !e.key.overflow
                    && e.key.database == key.database
                    && e.key.bucket == key.bucket
                    && e.key.source() == key.source()
            })
            .count()
    }

    /// Count `counts` for the hour entry `hour` and the minute entry
    /// `minute` (of the same database and source), within the database's
    /// shares: past [`DATABASE_SHARE`], or past [`UNCHECKED_SHARE`] for a
    /// source that is not configured, a new hour entry's counts go to the
    /// overflow entry and a new minute entry is not made (counted as
    /// dropped). `AskKnown` (and nothing counted) when the answer depends on
    /// whether the source is configured and `known` does not say.
    fn count(&mut self, hour: &Key, minute: &Key, counts: &Counts, known: Known) -> Result<(), AskKnown> {
        let mut hour = *hour;
        let mut hour_new = !self.entries[self.probe(&hour)].used;
        if hour_new && self.event_types(&hour) >= SOURCE_EVENT_TYPES {
            // a source's made-up event types stop here: the rest count
            // under one event type of the source, not another source's room
            hour = Key::new(hour.database, hour.bucket, hour.source(), OTHER_EVENT_TYPE.as_bytes());
            hour_new = !self.entries[self.probe(&hour)].used;
        }
        let hour = &hour;
        let mut minute_new = !self.entries[self.probe(minute)].used;
        let mut minute_skipped = false;
        let mut refused = false;
        if hour_new || minute_new {
            let (all, unchecked) = self.usage(hour.database);
            if minute_new && (all >= MINUTE_ROOM || self.used >= MAX_LOAD) {
                // minute detail is given up first
                (minute_new, minute_skipped) = (false, true);
            }
            let more = usize::from(hour_new) + usize::from(minute_new);
            if all + more > DATABASE_SHARE {
                refused = true;
            } else if known != Known::Yes && unchecked + more > UNCHECKED_SHARE {
                if known == Known::Unchecked {
                    return Err(AskKnown);
                }
                refused = true;
            }
        }
        let unchecked = known != Known::Yes;
        if refused && hour_new {
            self.add(&hour.overflow(), counts);
        } else {
            self.add_as(hour, counts, unchecked);
        }
        if minute_skipped || (refused && minute_new) {
            self.minutes_dropped += 1;
        } else {
            self.add_minute_as(minute, counts, false, unchecked);
        }
        Ok(())
    }

    /// Add `counts` to a minute entry, creating it only while its database
    /// holds fewer than [`MINUTE_ROOM`] entries (or always, with `room` false:
    /// re-adding entries that were there): minute detail is dropped, and
    /// counted as dropped, when flushes stay away long enough for minutes
    /// to pile up (the hourly counts are not).
    #[cfg(test)]
    fn add_minute(&mut self, key: &Key, counts: &Counts, room: bool) {
        self.add_minute_as(key, counts, room, false);
    }

    /// [`Table::add_minute`], marking a new entry `unchecked`.
    fn add_minute_as(&mut self, key: &Key, counts: &Counts, room: bool, unchecked: bool) {
        let slot = self.probe(key);
        if !self.entries[slot].used {
            if room && self.usage(key.database).0 >= MINUTE_ROOM {
                self.minutes_dropped += 1;
                return;
            }
            self.entries[slot] = Entry { used: true, unchecked, key: *key, counts: [0; SLOTS] };
            self.used += 1;
        }
        for (total, n) in self.entries[slot].counts.iter_mut().zip(counts) {
            *total += n;
        }
    }

    /// Copy every entry of `database` into `out` (which must have room for
    /// [`CAPACITY`] entries, so nothing allocates) and remove them, keeping
    /// the other databases' entries, except their minute entries older than
    /// [`MINUTE_KEEP_US`] before `now`.
    fn take(&mut self, database: u32, now: i64, out: &mut Vec<Entry>) {
        debug_assert!(out.capacity() - out.len() >= CAPACITY);
        let keep_from = out.len();
        for e in self.entries.iter().filter(|e| e.used) {
            out.push(*e);
        }
        // Rebuild: clear in place, then re-add the others' entries (no tombstones).
        for e in self.entries.iter_mut() {
            e.used = false;
        }
        self.used = 0;
        let mut i = keep_from;
        while i < out.len() {
            if out[i].key.database == database {
                i += 1;
            } else {
                let other = out.swap_remove(i);
                if other.key.minute {
                    if other.key.bucket >= now - MINUTE_KEEP_US {
                        // it was there, so it fits again: no room check
                        self.add_minute_as(&other.key, &other.counts, false, other.unchecked);
                    }
                } else {
                    self.add_as(&other.key, &other.counts, other.unchecked);
                }
            }
        }
    }

    /// Copy every entry of `database` into `out` (room as in [`Table::take`]).
    fn copy(&self, database: u32, out: &mut Vec<Entry>) {
        debug_assert!(out.capacity() - out.len() >= CAPACITY);
        out.extend(self.entries.iter().filter(|e| e.used && e.key.database == database));
    }
}

/// A snapshot of one entry, owned by Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Start of the bucket.
    pub bucket: i64,
    /// A minute bucket (event type empty), else an hour.
    pub minute: bool,
    pub source: String,
    pub event_type: String,
    pub counts: Vec<i64>,
}

impl Row {
    fn from_entry(e: &Entry) -> Row {
        let source = if e.key.overflow {
            OVERFLOW_SOURCE.to_string()
        } else {
            String::from_utf8_lossy(e.key.source()).into_owned()
        };
        Row {
            bucket: e.key.bucket,
            minute: e.key.minute,
            source,
            event_type: String::from_utf8_lossy(e.key.event_type()).into_owned(),
            counts: e.counts[..Counter::ALL.len()].to_vec(),
        }
    }
}

fn database() -> u32 {
    // SAFETY: a backend-global set at connection; read-only here.
    unsafe { pg_sys::MyDatabaseId.to_u32() }
}

/// Count one event: `Deliveries` (when `delivery`) plus `counter`, for
/// `source` and `event_type` in the current hour of this database, and for
/// `source` in the current minute. Does nothing when the library was not
/// preloaded.
pub fn count(source: &str, event_type: Option<&str>, counter: Counter, delivery: bool) {
    if !shared() {
        return;
    }
    let now = crate::time::clock_now();
    let source_text = source;
    let source = cut(source, SOURCE_BYTES);
    let key = Key::new(database(), align_down(now, HOUR_US), source, cut(event_type.unwrap_or(""), EVENT_TYPE_BYTES));
    let minute = Key::minute(database(), align_down(now, MINUTE_US), source);
    let mut counts: Counts = [0; SLOTS];
    counts[counter as usize] += 1;
    if delivery {
        counts[Counter::Deliveries as usize] += 1;
    }
    let mut known = Known::Unchecked;
    while TABLE.exclusive().count(&key, &minute, &counts, known) == Err(AskKnown) {
        // only when the database's unchecked share is used up: not under
        // the lock (SPI), and cached per backend (store::sources)
        let configured = spi::connected(|conn| crate::store::sources::settings(conn, source_text).configured);
        known = if configured { Known::Yes } else { Known::No };
    }
}

/// The live (not yet flushed) counters of this database.
pub fn live_rows() -> Vec<Row> {
    if !shared() {
        return Vec::new();
    }
    let mut buffer = Vec::with_capacity(CAPACITY);
    TABLE.share().copy(database(), &mut buffer);
    buffer.iter().map(Row::from_entry).collect()
}

/// Move this database's live counters into `webhook_dedup.claim_counts`.
/// Returns the number of entries written. If this transaction aborts after
/// the move, the moved counts are lost (at most one flush interval's worth).
pub fn flush() -> i64 {
    if !shared() {
        return 0;
    }
    let mut buffer = Vec::with_capacity(CAPACITY);
    let (dropped, minutes_dropped) = {
        let mut table = TABLE.exclusive();
        table.take(database(), crate::time::clock_now(), &mut buffer);
        (std::mem::take(&mut table.dropped), std::mem::take(&mut table.minutes_dropped))
    };
    if dropped > 0 {
        pgrx::warning!(
            "webhook_dedup: {dropped} claim counts were dropped because the shared metrics table was full; \
             flush more often (run webhook_dedup.run_maintenance())"
        );
    }
    if minutes_dropped > 0 {
        pgrx::warning!(
            "webhook_dedup: {minutes_dropped} per-minute counts were not kept because the shared metrics table \
             was too full (the hourly counts were); duplicate_metrics_by_minute and duplicate_rate_alerts with \
             windows up to an hour miss them: flush more often, in every database with the extension"
        );
    }
    let rows: Vec<Row> = buffer.iter().map(Row::from_entry).collect();
    spi::connected(|conn| rows.iter().for_each(|row| upsert(conn, row)));
    rows.len() as i64
}

static UPSERT: Statement = Statement::new(
    crate::sql_statement!("metrics_upsert.sql"),
    &[pg_sys::TIMESTAMPTZOID, pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::INT8ARRAYOID],
);

fn upsert(conn: &Conn<'_>, row: &Row) {
    conn.execute(
        &UPSERT,
        &[
            arg(crate::time::timestamptz(row.bucket)),
            arg(row.source.as_str()),
            arg(row.event_type.as_str()),
            arg(if row.minute { "1 minute" } else { "1 hour" }),
            arg(row.counts.clone()),
        ],
        Snap::Statement,
    );
}

/// SQL functions in schema `webhook_dedup`.
#[pg_schema]
mod webhook_dedup {
    use super::{flush, live_rows};
    use pgrx::datum::TimestampWithTimeZone;
    use pgrx::prelude::*;

    /// The live counters as rows (used by the `duplicate_metrics` view).
    #[pg_extern(volatile, parallel_restricted)]
    #[allow(clippy::type_complexity)]
    fn metrics_live() -> TableIterator<
        'static,
        (
            name!(bucket, TimestampWithTimeZone),
            name!(minute, bool),
            name!(source, String),
            name!(event_type, String),
            name!(counts, Vec<i64>),
        ),
    > {
        TableIterator::new(
            live_rows()
                .into_iter()
                .map(|r| (crate::time::timestamptz(r.bucket), r.minute, r.source, r.event_type, r.counts)),
        )
    }

    /// Flush the live counters now; returns how many entries were written.
    #[pg_extern(volatile, parallel_unsafe)]
    fn flush_metrics() -> i64 {
        flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(counters: &[Counter]) -> Counts {
        let mut c = [0; SLOTS];
        for x in counters {
            c[*x as usize] += 1;
        }
        c
    }

    /// A table on the heap (it is ~700 KB: too big for a test thread's stack).
    fn table() -> Box<Table> {
        // SAFETY: all-zero bytes are a valid, empty Table (false, 0, zeroed arrays).
        unsafe { Box::<Table>::new_zeroed().assume_init() }
    }

    fn rows(t: &Table, database: u32) -> Vec<Row> {
        let mut buffer = Vec::with_capacity(CAPACITY);
        t.copy(database, &mut buffer);
        let mut rows: Vec<Row> = buffer.iter().map(Row::from_entry).collect();
        rows.sort_by(|a, b| {
            (a.minute, a.bucket, &a.source, &a.event_type).cmp(&(b.minute, b.bucket, &b.source, &b.event_type))
        });
        rows
    }

    #[test]
    fn counts_accumulate_per_key() {
        let mut t = table();
        t.add(&Key::new(1, 0, b"github", b"push"), &counts(&[Counter::Deliveries, Counter::FirstClaims]));
        t.add(&Key::new(1, 0, b"github", b"push"), &counts(&[Counter::Deliveries, Counter::DuplicatesOfCompleted]));
        t.add(&Key::new(1, 0, b"github", b"issues"), &counts(&[Counter::Deliveries]));
        t.add(&Key::new(1, HOUR_US, b"github", b"push"), &counts(&[Counter::Deliveries]));
        let rows = rows(&t, 1);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].event_type, "push");
        assert_eq!(rows[1].counts[Counter::Deliveries as usize], 2);
        assert_eq!(rows[1].counts[Counter::FirstClaims as usize], 1);
        assert_eq!(rows[1].counts[Counter::DuplicatesOfCompleted as usize], 1);
    }

    #[test]
    fn databases_are_kept_apart_and_flushed_apart() {
        let mut t = table();
        for db in [1, 2] {
            for i in 0..10 {
                t.add(&Key::new(db, 0, format!("s{i}").as_bytes(), b""), &counts(&[Counter::Deliveries]));
            }
        }
        assert_eq!(rows(&t, 1).len(), 10);
        let mut taken = Vec::with_capacity(CAPACITY);
        t.take(1, 0, &mut taken);
        assert_eq!(taken.len(), 10);
        assert!(taken.iter().all(|e| e.key.database == 1));
        assert!(rows(&t, 1).is_empty());
        // database 2's entries survived the rebuild and are still found
        assert_eq!(rows(&t, 2).len(), 10);
        t.add(&Key::new(2, 0, b"s3", b""), &counts(&[Counter::Deliveries]));
        assert_eq!(rows(&t, 2).len(), 10);
        assert_eq!(t.used, 10);
    }

    #[test]
    fn past_max_load_counts_go_to_the_overflow_entry_of_their_hour() {
        let mut t = table();
        for i in 0..MAX_LOAD + 5 {
            t.add(&Key::new(1, 0, format!("s{i}").as_bytes(), b""), &counts(&[Counter::Deliveries]));
        }
        t.add(&Key::new(1, HOUR_US, b"late", b""), &counts(&[Counter::Deliveries]));
        let rows = rows(&t, 1);
        let overflow: Vec<&Row> = rows.iter().filter(|r| r.source == OVERFLOW_SOURCE).collect();
        assert_eq!(overflow.len(), 2, "one overflow entry per hour");
        assert_eq!(overflow[0].counts[Counter::Deliveries as usize], 5);
        assert_eq!((overflow[1].bucket, overflow[1].counts[0]), (HOUR_US, 1));
        let total: i64 = rows.iter().map(|r| r.counts[0]).sum();
        assert_eq!(total, (MAX_LOAD + 6) as i64, "nothing lost");
        assert_eq!(t.dropped, 0);
    }

    #[test]
    fn a_completely_full_table_drops_and_counts_the_drops() {
        let mut t = table();
        // overflow entries of many hours fill the headroom
        for hour in 0..CAPACITY as i64 {
            t.add(&Key::new(1, hour, b"", b"").overflow(), &counts(&[Counter::Deliveries]));
        }
        assert_eq!(t.used, CAPACITY - 1, "one slot always stays empty");
        assert_eq!(t.dropped, 1);
    }

    #[test]
    fn minute_entries_count_per_source_and_never_crowd_out_hours() {
        let mut t = table();
        let c = counts(&[Counter::Deliveries, Counter::FirstClaims]);
        t.add_minute(&Key::minute(1, 0, b"github"), &c, true);
        t.add_minute(&Key::minute(1, 0, b"github"), &c, true);
        t.add_minute(&Key::minute(1, MINUTE_US, b"github"), &c, true);
        let minutes: Vec<Row> = rows(&t, 1).into_iter().filter(|r| r.minute).collect();
        assert_eq!(minutes.len(), 2);
        assert_eq!((minutes[0].bucket, minutes[0].counts[0], minutes[0].event_type.as_str()), (0, 2, ""));
        // an hour entry with the same source and bucket is a different entry
        t.add(&Key::new(1, 0, b"github", b""), &c);
        assert_eq!(rows(&t, 1).len(), 3);
        // past MINUTE_ROOM new minutes are not made, existing ones still count
        for i in 0..MINUTE_ROOM {
            t.add(&Key::new(1, 0, format!("s{i}").as_bytes(), b""), &c);
        }
        t.add_minute(&Key::minute(1, 2 * MINUTE_US, b"github"), &c, true);
        t.add_minute(&Key::minute(1, 0, b"github"), &c, true);
        let minutes: Vec<Row> = rows(&t, 1).into_iter().filter(|r| r.minute).collect();
        assert_eq!(minutes.len(), 2, "no new minute entry");
        assert_eq!(minutes[0].counts[0], 3, "the existing one still counts");
        // hour entries still go in up to MAX_LOAD
        t.add(&Key::new(1, 0, b"late", b""), &c);
        assert!(rows(&t, 1).iter().any(|r| r.source == "late"));
    }

    #[test]
    fn taking_one_database_keeps_the_others_minutes() {
        let mut t = table();
        let c = counts(&[Counter::Deliveries]);
        t.add_minute(&Key::minute(1, 0, b"a"), &c, true);
        t.add_minute(&Key::minute(2, 0, b"b"), &c, true);
        let mut taken = Vec::with_capacity(CAPACITY);
        t.take(1, 0, &mut taken);
        assert_eq!(taken.len(), 1);
        assert!(taken[0].key.minute);
        let left = rows(&t, 2);
        assert_eq!((left.len(), left[0].minute, left[0].source.as_str()), (1, true, "b"));
    }

    #[test]
    fn a_flush_keeps_the_other_databases_minutes_however_many_but_not_stale_ones() {
        let mut t = table();
        let c = counts(&[Counter::Deliveries]);
        let now = 10 * HOUR_US;
        // database 2 never flushes: more recent minute entries than MINUTE_ROOM
        // (made while the table had room), and some older than two hours
        for i in 0..MINUTE_ROOM as i64 {
            t.add_minute(&Key::minute(2, now - i * MINUTE_US, b"s"), &c, false);
        }
        t.add_minute(&Key::minute(2, now - 3 * HOUR_US, b"old"), &c, false);
        t.add_minute(&Key::minute(1, now, b"mine"), &c, true);
        assert_eq!(t.minutes_dropped, 0, "database 2's minutes leave database 1 its room");
        let mut taken = Vec::with_capacity(CAPACITY);
        t.take(1, now, &mut taken);
        let kept = rows(&t, 2);
        let recent = (MINUTE_KEEP_US / MINUTE_US + 1) as usize;
        assert_eq!(kept.len(), recent, "the last two hours of minutes stay, older ones go");
        assert!(kept.iter().all(|r| r.minute && r.source == "s" && r.bucket >= now - MINUTE_KEEP_US));
    }

    /// Count one delivery of `source` in `database` as `count()` does: ask
    /// whether the source is configured only when the table says so.
    fn count_in(t: &mut Table, database: u32, source: &str, configured: bool) -> bool {
        let hour = Key::new(database, 0, source.as_bytes(), b"e");
        let minute = Key::minute(database, 0, source.as_bytes());
        let c = counts(&[Counter::Deliveries]);
        match t.count(&hour, &minute, &c, Known::Unchecked) {
            Ok(()) => false,
            Err(AskKnown) => {
                let known = if configured { Known::Yes } else { Known::No };
                assert_eq!(t.count(&hour, &minute, &c, known), Ok(()));
                true
            }
        }
    }

    fn ordinary(t: &Table, database: u32) -> Vec<Row> {
        rows(t, database).into_iter().filter(|r| r.source != OVERFLOW_SOURCE).collect()
    }

    /// Issue 13, fault 2: 1,700 made-up sources in one database filled the
    /// table, and every database's real sources were counted as
    /// `(overflow)`. Now the flood stops at the database's unchecked share
    /// (its counts go to its overflow entry, none lost), a configured
    /// source of the same database still gets its own entries, and so does
    /// every source of another database.
    #[test]
    fn a_flood_of_made_up_sources_leaves_room_for_configured_ones_and_other_databases() {
        let mut t = table();
        let mut asked = 0;
        for i in 0..1700 {
            asked += usize::from(count_in(&mut t, 1, &format!("fake{i}"), false));
        }
        assert!(asked > 0, "the lookup happened, once the share was used up");
        let kept = ordinary(&t, 1);
        assert_eq!(kept.len(), UNCHECKED_SHARE, "hours and minutes of the first sources");
        let hours: i64 = rows(&t, 1).iter().filter(|r| !r.minute).map(|r| r.counts[0]).sum();
        assert_eq!(hours, 1700, "every delivery is counted in an hour entry or the overflow entry");
        assert!(t.minutes_dropped > 0);
        // a configured source of the flooded database gets its own entries
        assert!(count_in(&mut t, 1, "stripe", true), "it was looked up");
        assert!(ordinary(&t, 1).iter().any(|r| r.source == "stripe" && !r.minute));
        assert!(ordinary(&t, 1).iter().any(|r| r.source == "stripe" && r.minute));
        // another database's unconfigured sources are not even looked up
        assert!(!count_in(&mut t, 2, "github", false));
        assert_eq!(ordinary(&t, 2).len(), 2);
    }

    /// A flood of made-up event types on one (configured) source stays in
    /// that source's `(other)` entry, and leaves room to the others.
    #[test]
    fn a_source_keeps_a_bounded_number_of_event_types_apart() {
        let mut t = table();
        let c = counts(&[Counter::Deliveries]);
        for i in 0..1000 {
            let hour = Key::new(1, 0, b"stripe", format!("type{i}").as_bytes());
            let minute = Key::minute(1, 0, b"stripe");
            assert_eq!(t.count(&hour, &minute, &c, Known::Yes), Ok(()));
        }
        let stripe: Vec<Row> = ordinary(&t, 1).into_iter().filter(|r| r.source == "stripe" && !r.minute).collect();
        assert_eq!(stripe.len(), SOURCE_EVENT_TYPES + 1);
        let other = stripe.iter().find(|r| r.event_type == OTHER_EVENT_TYPE).expect("an (other) entry");
        assert_eq!(other.counts[0], (1000 - SOURCE_EVENT_TYPES) as i64);
        assert!(!count_in(&mut t, 1, "github", true), "room is left for the database's other sources");
        assert!(ordinary(&t, 1).iter().any(|r| r.source == "github"));
    }

    /// A database's configured sources too stop at its share, so that the
    /// others always keep room.
    #[test]
    fn one_database_leaves_the_others_room() {
        let mut t = table();
        for i in 0..MAX_LOAD {
            count_in(&mut t, 1, &format!("s{i}"), true);
        }
        assert_eq!(ordinary(&t, 1).len(), DATABASE_SHARE);
        for i in 0..10 {
            count_in(&mut t, 2, &format!("t{i}"), false);
        }
        assert_eq!(ordinary(&t, 2).len(), 20, "hours and minutes");
    }

    /// A flush keeps whether the other databases' entries were checked.
    #[test]
    fn a_flush_keeps_the_other_databases_shares() {
        let mut t = table();
        for i in 0..UNCHECKED_SHARE {
            count_in(&mut t, 2, &format!("fake{i}"), false);
        }
        let mut taken = Vec::with_capacity(CAPACITY);
        t.take(1, 0, &mut taken);
        assert!(count_in(&mut t, 2, "one more", false), "still full after database 1's flush");
    }

    #[test]
    fn every_rejection_reason_has_its_counter() {
        let mut columns: Vec<&str> =
            Reason::ALL.iter().filter_map(|r| Counter::for_rejection(*r)).map(|c| c.column()).collect();
        assert_eq!(columns.len(), Reason::ALL.len() - 1, "all but ok");
        for (reason, column) in Reason::ALL[1..].iter().zip(&columns) {
            assert_eq!(*column, format!("rejected_{}", reason.as_str()));
        }
        columns.dedup();
        assert_eq!(columns.len(), Reason::ALL.len() - 1);
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("abc", 2), b"ab");
        assert_eq!(cut("é", 1), b"");
        assert_eq!(cut("aé", 2), b"a");
        assert_eq!(cut("ok", 64), b"ok");
    }
}
