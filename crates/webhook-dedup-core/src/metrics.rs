//! The claim metrics' counter table: pure logic, no PostgreSQL. The
//! extension keeps one [`Table`] in shared memory under an LWLock and
//! flushes it to `webhook_dedup.claim_counts` (`src/metrics.rs`, the glue:
//! the lock, the lookup of a source's configuration, the flush); every rule
//! of what is counted where lives here and is unit-tested with plain
//! `cargo test`.
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
//! The extension's flush moves the current database's counters into
//! `webhook_dedup.claim_counts` (called by `webhook_dedup.run_maintenance()`,
//! with [`Table::take`]); `webhook_dedup.duplicate_metrics` adds the flushed
//! rows and the live ones ([`Table::copy`]).
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
//!   `(overflow)`, one database holds at most [`DATABASE_SHARE`] entries
//!   (the other databases keep the rest), and at most [`UNCHECKED_SHARE`]
//!   of them for sources that are not configured in
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
//! Names are kept whole: an entry holds its whole source (every source
//! fits: [`SOURCE_BYTES`]) and its whole event type up to
//! [`EVENT_TYPE_CHARS`] characters; a longer event type is counted as
//! [`OTHER_EVENT_TYPE`], never under a cut name that two event types (or a
//! real one) could share.
//!
//! Locking rule: the LWLock is held only to probe the open-addressing table
//! or to copy fixed-size entries into a buffer allocated beforehand; no
//! allocation, SPI or ereport happens under it.
//!
//! The table takes 4.6 MiB (2,048 entries of 2,344 bytes), so it is zeroed
//! in place in shared memory and never built or copied on a stack (it is
//! not `Copy`; an entry, 2.3 KB, is).

use crate::calendar::align_down;
use crate::claim::Outcome;
use crate::signature::Reason;
use std::ops::Deref;

/// Entries in the shared table.
pub const CAPACITY: usize = 2048;
/// Ordinary entries stop at this load, so every probe ends at an empty slot
/// within a few steps; the rest is headroom for overflow entries.
pub const MAX_LOAD: usize = CAPACITY * 3 / 4;
/// Bytes of a source kept in a metrics entry: every source is, whole. A
/// source is 1 to [`MAX_KEY_CHARS`](crate::key::MAX_KEY_CHARS) (255)
/// characters ([`crate::key::check_bounded`]), at most 4 bytes each in
/// UTF-8. (One longer in bytes can only come from a row written around the
/// functions: it is counted in the overflow entry, see the extension's `metrics::count`.)
pub const SOURCE_BYTES: usize = crate::key::MAX_KEY_CHARS * 4;
/// Characters of an event type counted under its own name: the bound of
/// sources and idempotency keys, as the extension bounds no event type
/// (`webhook_claim`, `webhook_enqueue` take any text, `webhook_receive` reads
/// it from the payload or a header, `crates/webhook-dedup-core/src/profile.rs`). Providers' event
/// types are a few dozen characters (Stripe's
/// `customer.subscription.pending_update_incomplete` has 47), so the
/// bound only stops made-up ones; a longer one is counted as
/// [`OTHER_EVENT_TYPE`].
pub const EVENT_TYPE_CHARS: usize = crate::key::MAX_KEY_CHARS;
/// Bytes of an event type kept in a metrics entry: [`EVENT_TYPE_CHARS`]
/// characters of up to 4 bytes.
pub const EVENT_TYPE_BYTES: usize = EVENT_TYPE_CHARS * 4;
/// Counters in a set: one per [`Counter`].
pub const SLOTS: usize = Counter::ALL.len();
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
pub const OVERFLOW_SOURCE: &str = crate::key::RESERVED_SOURCE;
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
/// The event type counts of a source's further event types go to, and
/// those of event types longer than [`EVENT_TYPE_CHARS`].
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
    /// `webhook_receive` deliveries refused because their signed token
    /// (Mailgun's) came before with other content
    /// (`crate::store::signature_tokens`). Last: new columns of
    /// `webhook_dedup.claim_counts` are appended.
    RejectedTokenReused,
    /// Outbox intents written (`webhook_outbox_put` storing a new one).
    IntentsWritten,
    /// Outbox intents acknowledged (`webhook_outbox_ack`).
    IntentsDelivered,
    /// Outbox intents failed retryably (`webhook_outbox_fail`).
    IntentRetries,
    /// Outbox intents dead-lettered.
    IntentsDeadLettered,
    /// Outbox intents parked as `unknown_outcome`.
    IntentsUnknown,
    /// Outbox intents whose sender's lease lapsed.
    IntentLeasesExpired,
    /// Events the provider sent that never arrived, enqueued by a
    /// reconciliation job (`webhook_dedup.reconcile`): a leaky endpoint.
    Reconciled,
}

impl Counter {
    pub const ALL: [Counter; 37] = [
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
        Counter::RejectedTokenReused,
        Counter::IntentsWritten,
        Counter::IntentsDelivered,
        Counter::IntentRetries,
        Counter::IntentsDeadLettered,
        Counter::IntentsUnknown,
        Counter::IntentLeasesExpired,
        Counter::Reconciled,
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
            Counter::RejectedTokenReused => "rejected_token_reused",
            Counter::IntentsWritten => "intents_written",
            Counter::IntentsDelivered => "intents_delivered",
            Counter::IntentRetries => "intent_retries",
            Counter::IntentsDeadLettered => "intents_dead_lettered",
            Counter::IntentsUnknown => "intents_unknown",
            Counter::IntentLeasesExpired => "intent_leases_expired",
            Counter::Reconciled => "reconciled",
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

/// One counter set, indexed by [`Counter`].
pub type Counts = [i64; SLOTS];

/// What an entry counts for: an hour of a source and event type, or a
/// minute of a source (all event types). The names are borrowed: a key is
/// looked up without copying them ([`Stored`] holds them in an entry).
#[derive(Clone, Copy)]
pub struct Key<'a> {
    database: u32,
    /// Start of the bucket (microseconds since the PostgreSQL epoch).
    bucket: i64,
    /// A minute bucket (event type empty) rather than an hour bucket.
    minute: bool,
    overflow: bool,
    source: &'a [u8],
    event_type: &'a [u8],
    /// Of the fields above ([`Key::hash`]), computed once.
    hash: u64,
}

impl<'a> Key<'a> {
    fn new(database: u32, hour: i64, source: &'a [u8], event_type: &'a [u8]) -> Key<'a> {
        Key::make(database, hour, false, false, source, event_type)
    }

    /// The minute entry of `source` (all event types).
    fn minute(database: u32, minute: i64, source: &'a [u8]) -> Key<'a> {
        Key::make(database, minute, true, false, source, b"")
    }

    /// The overflow entry of this key's database and hour.
    fn overflow(&self) -> Key<'static> {
        Key::make(self.database, self.bucket, false, true, b"", b"")
    }

    fn make(
        database: u32,
        bucket: i64,
        minute: bool,
        overflow: bool,
        source: &'a [u8],
        event_type: &'a [u8],
    ) -> Key<'a> {
        let hash = Key::hash(database, bucket, minute, overflow, source, event_type);
        Key { database, bucket, minute, overflow, source, event_type, hash }
    }

    fn same(&self, other: &Key) -> bool {
        self.hash == other.hash
            && self.database == other.database
            && self.bucket == other.bucket
            && self.minute == other.minute
            && self.overflow == other.overflow
            && same_bytes(self.source, other.source)
            && same_bytes(self.event_type, other.event_type)
    }

    /// FNV-1a over the key, for the probe start.
    fn hash(database: u32, bucket: i64, minute: bool, overflow: bool, source: &[u8], event_type: &[u8]) -> u64 {
        let flags = [overflow as u8 | (minute as u8) << 1];
        let parts: [&[u8]; 6] = [&database.to_le_bytes(), &bucket.to_le_bytes(), &flags, source, &[0xff], event_type];
        parts
            .iter()
            .flat_map(|part| part.iter())
            .fold(0xcbf2_9ce4_8422_2325, |h: u64, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }
}

/// `a == b`, eight bytes at a time, without a library call. Measured on
/// the development machine (AMD EPYC, glibc's `__memcmp_evex_movbe`,
/// `bench_count` in release): with slice `==`, glibc's `memcmp` took two
/// thirds of a count, 473 ns a count of an existing entry against 65 ns
/// with this, and 7.1 us against 2.5 us a count that creates its entries.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a8, mut b8) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut a8).zip(&mut b8) {
        let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().expect("8 bytes"));
        if word(x) != word(y) {
            return false;
        }
    }
    let (x, y) = (a8.remainder(), b8.remainder());
    (0..x.len()).all(|i| x[i] == y[i])
}

/// A [`Key`] as an entry holds it, names whole: 2,072 bytes. `repr(C)`
/// with the small fields first, so that a probe or a scan reads one cache
/// line of an entry (with the names' first bytes).
#[derive(Clone, Copy)]
#[repr(C)]
struct Stored {
    hash: u64,
    bucket: i64,
    database: u32,
    minute: bool,
    overflow: bool,
    source_len: u16,
    event_type_len: u16,
    source: [u8; SOURCE_BYTES],
    event_type: [u8; EVENT_TYPE_BYTES],
}

impl Stored {
    /// Overwrite with `key` (the bytes past the names' lengths are left as
    /// they were: never read). Panics if a name does not fit (the callers
    /// make sure it does: [`keys`]).
    fn set(&mut self, key: &Key) {
        self.hash = key.hash;
        self.bucket = key.bucket;
        self.database = key.database;
        self.minute = key.minute;
        self.overflow = key.overflow;
        self.source_len = key.source.len() as u16;
        self.event_type_len = key.event_type.len() as u16;
        self.source[..key.source.len()].copy_from_slice(key.source);
        self.event_type[..key.event_type.len()].copy_from_slice(key.event_type);
    }

    fn key(&self) -> Key<'_> {
        Key {
            database: self.database,
            bucket: self.bucket,
            minute: self.minute,
            overflow: self.overflow,
            source: self.source(),
            event_type: self.event_type(),
            hash: self.hash,
        }
    }

    fn source(&self) -> &[u8] {
        &self.source[..usize::from(self.source_len)]
    }

    fn event_type(&self) -> &[u8] {
        &self.event_type[..usize::from(self.event_type_len)]
    }
}

/// One counter set (2,344 bytes: copied one at a time, never a table's
/// worth on a stack).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Entry {
    used: bool,
    /// Made for a source not found in `webhook_dedup.sources` (or not
    /// looked up): counts against the database's [`UNCHECKED_SHARE`].
    unchecked: bool,
    key: Stored,
    counts: Counts,
}

impl Entry {
    /// Make this (unused) slot `key`'s entry, with zero counts.
    fn make(&mut self, key: &Key, unchecked: bool) {
        self.used = true;
        self.unchecked = unchecked;
        self.key.set(key);
        self.counts = [0; SLOTS];
    }
}

/// The shared table: open addressing with linear probing, at most
/// [`CAPACITY`] - 1 entries used (so a probe always meets an empty slot);
/// entries are only removed by rebuilding (see [`Table::take`]), so there
/// are no tombstones. All-zero bytes are an empty table: that is how it is
/// made, in place (shared memory, or a zeroed box in the tests), and it is
/// deliberately neither `Copy`, `Clone` nor `Default`, so that no code can
/// build or copy its 4.6 MiB on a stack (the postmaster's is 8 MB).
pub struct Table {
    entries: [Entry; CAPACITY],
    used: usize,
    dropped: u64,
    minutes_dropped: u64,
}

/// The hour and minute keys one event of `source` and `event_type` is
/// counted under, at `now` in `database`: both names whole, an event type
/// longer than [`EVENT_TYPE_CHARS`] characters as [`OTHER_EVENT_TYPE`].
/// `None` for a source too long to keep whole (only a row written around
/// the functions' checks can hold one): it is never counted under a cut
/// name, which another source could share.
fn keys<'a>(database: u32, now: i64, source: &'a str, event_type: &'a str) -> Option<(Key<'a>, Key<'a>)> {
    if source.len() > SOURCE_BYTES {
        return None;
    }
    let source = source.as_bytes();
    // up to EVENT_TYPE_CHARS bytes is at most as many characters
    let event_type = if event_type.len() <= EVENT_TYPE_CHARS || event_type.chars().count() <= EVENT_TYPE_CHARS {
        event_type
    } else {
        OTHER_EVENT_TYPE
    };
    let hour = Key::new(database, align_down(now, HOUR_US), source, event_type.as_bytes());
    let minute = Key::minute(database, align_down(now, MINUTE_US), source);
    Some((hour, minute))
}

/// Where one event is counted: its hour and minute entries, or (for a
/// source too long to keep whole) the overflow entry of its hour.
pub enum Event<'a> {
    Named { hour: Key<'a>, minute: Key<'a> },
    Overflow(Key<'static>),
}

/// The entries one event of `source` and `event_type` at `now` (microseconds
/// since the PostgreSQL epoch) in `database` is counted under ([`keys`]).
/// Computed before the table's lock is taken: it hashes both names.
pub fn event<'a>(database: u32, now: i64, source: &'a str, event_type: &'a str) -> Event<'a> {
    match keys(database, now, source, event_type) {
        Some((hour, minute)) => Event::Named { hour, minute },
        // a source longer than any the functions accept: its hour's
        // overflow entry, not a cut name
        None => Event::Overflow(Key::new(database, align_down(now, HOUR_US), b"", b"").overflow()),
    }
}

/// The counts of one event: `counter`, plus [`Counter::Deliveries`] when
/// `delivery`.
pub fn event_counts(counter: Counter, delivery: bool) -> Counts {
    let mut counts: Counts = [0; SLOTS];
    counts[counter as usize] += 1;
    if delivery {
        counts[Counter::Deliveries as usize] += 1;
    }
    counts
}

impl Table {
    /// Count `counts` for `event` within the database's shares
    /// ([`Table::count`]); `AskKnown` when that depends on whether the
    /// source is configured and `known` does not say: look it up outside
    /// the lock and record again.
    pub fn record(&mut self, event: &Event, counts: &Counts, known: Known) -> Result<(), AskKnown> {
        match event {
            Event::Named { hour, minute } => self.count(hour, minute, counts, known),
            Event::Overflow(key) => {
                self.add(key, counts);
                Ok(())
            }
        }
    }

    /// The counts dropped since the last call (the table was full) and the
    /// minute counts not kept (the database's minute room was used up),
    /// reset to zero: the flush warns about them.
    pub fn take_dropped(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.dropped), std::mem::take(&mut self.minutes_dropped))
    }
}

impl Table {
    /// The slot holding `key`, or the empty slot where it would go.
    fn probe(&self, key: &Key) -> usize {
        let mut slot = key.hash as usize % CAPACITY;
        while self.entries[slot].used && !self.entries[slot].key.key().same(key) {
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
            self.entries[slot].make(key, unchecked);
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
                    && same_bytes(e.key.source(), key.source)
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
            hour = Key::new(hour.database, hour.bucket, hour.source, OTHER_EVENT_TYPE.as_bytes());
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

    /// `Table::add_minute`, marking a new entry `unchecked`.
    fn add_minute_as(&mut self, key: &Key, counts: &Counts, room: bool, unchecked: bool) {
        let slot = self.probe(key);
        if !self.entries[slot].used {
            if room && self.usage(key.database).0 >= MINUTE_ROOM {
                self.minutes_dropped += 1;
                return;
            }
            self.entries[slot].make(key, unchecked);
            self.used += 1;
        }
        for (total, n) in self.entries[slot].counts.iter_mut().zip(counts) {
            *total += n;
        }
    }

    /// Copy every entry of `database` into `out` (which must have room for
    /// every entry in use, so nothing allocates: [`with_room`]) and remove
    /// them, keeping the other databases' entries, except their minute
    /// entries older than [`MINUTE_KEEP_US`] before `now`.
    pub fn take(&mut self, database: u32, now: i64, out: &mut Vec<Entry>) {
        debug_assert!(out.capacity() - out.len() >= self.used);
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
                        self.add_minute_as(&other.key.key(), &other.counts, false, other.unchecked);
                    }
                } else {
                    self.add_as(&other.key.key(), &other.counts, other.unchecked);
                }
            }
        }
    }

    /// Copy every entry of `database` into `out` (room as in [`Table::take`]).
    pub fn copy(&self, database: u32, out: &mut Vec<Entry>) {
        debug_assert!(out.capacity() - out.len() >= self.used);
        out.extend(self.entries.iter().filter(|e| e.used && e.key.database == database));
    }
}

/// Entries a buffer gets beyond those in use when it was sized, for those
/// made before the lock is taken again.
const ROOM_SLACK: usize = 64;

/// `f(table, buffer)` with `table` from `lock()`, once `buffer` has room
/// for every entry in use: else the lock is let go, room made (allocated
/// and its pages touched, so that neither happens under the lock: a fresh
/// buffer's page faults made a take under the lock five times slower), and
/// the lock taken again.
pub fn with_room<G: Deref<Target = Table>, R>(
    buffer: &mut Vec<Entry>,
    mut lock: impl FnMut() -> G,
    f: impl FnOnce(G, &mut Vec<Entry>) -> R,
) -> R {
    loop {
        let table = lock();
        let used = table.used;
        if buffer.capacity() - buffer.len() >= used {
            return f(table, buffer);
        }
        drop(table);
        buffer.reserve((used + ROOM_SLACK).min(CAPACITY));
        for slot in buffer.spare_capacity_mut() {
            *slot = std::mem::MaybeUninit::zeroed();
        }
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
    pub fn from_entry(e: &Entry) -> Row {
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

    /// A table on the heap (4.6 MiB: too big for a test thread's stack).
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

    /// A flood of 1,700 made-up sources in one database filled the table,
    /// and every database's real sources were counted as `(overflow)`. Now
    /// the flood stops at the database's unchecked share (its counts go to
    /// its overflow entry, none lost), a configured source of the same
    /// database still gets its own entries, and so does every source of
    /// another database.
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
            let event_type = format!("type{i}");
            let hour = Key::new(1, 0, b"stripe", event_type.as_bytes());
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

    /// Count one delivery of `source` and `event_type` (a configured
    /// source) as `count()` does: through [`keys`].
    fn count_named(t: &mut Table, database: u32, source: &str, event_type: &str) {
        let (hour, minute) = keys(database, 0, source, event_type).expect("a source that fits");
        assert_eq!(t.count(&hour, &minute, &counts(&[Counter::Deliveries]), Known::Yes), Ok(()));
    }

    fn hours(t: &Table, database: u32) -> Vec<Row> {
        rows(t, database).into_iter().filter(|r| !r.minute).collect()
    }

    fn minutes(t: &Table, database: u32) -> Vec<Row> {
        rows(t, database).into_iter().filter(|r| r.minute).collect()
    }

    /// Two sources sharing their first 128 bytes were counted in one entry
    /// named by those 128 bytes (neither source).
    #[test]
    fn long_sources_sharing_a_prefix_are_counted_apart_under_their_whole_names() {
        let mut t = table();
        let a = format!("{}a", "s".repeat(199));
        let b = format!("{}b", "s".repeat(199));
        count_named(&mut t, 1, &a, "push");
        count_named(&mut t, 1, &b, "push");
        count_named(&mut t, 1, &b, "push");
        let by_source = |rows: Vec<Row>| rows.into_iter().map(|r| (r.source, r.counts[0])).collect::<Vec<_>>();
        assert_eq!(by_source(hours(&t, 1)), [(a.clone(), 1), (b.clone(), 2)]);
        assert_eq!(by_source(minutes(&t, 1)), [(a, 1), (b, 2)]);
    }

    #[test]
    fn a_source_of_255_four_byte_characters_is_kept_whole() {
        let mut t = table();
        let source = "😀".repeat(crate::key::MAX_KEY_CHARS);
        assert_eq!(source.len(), SOURCE_BYTES);
        assert!(crate::key::check_bounded("source", &source).is_ok(), "a source the functions accept");
        count_named(&mut t, 1, &source, "push");
        let rows = rows(&t, 1);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.source == source), "the hour and the minute entry");
    }

    /// The same mistake for event types, cut at 64 bytes before.
    #[test]
    fn long_event_types_sharing_a_prefix_are_not_merged() {
        let mut t = table();
        // within the bound: each kept whole
        let a = format!("{}.created", "e".repeat(100));
        let b = format!("{}.deleted", "e".repeat(100));
        count_named(&mut t, 1, "stripe", &a);
        count_named(&mut t, 1, "stripe", &b);
        let types: Vec<String> = hours(&t, 1).into_iter().map(|r| r.event_type).collect();
        assert_eq!(types, [a, b]);
        // past the bound: both (other), no cut name that a real event type
        // (here the cut itself) could share
        let cut = "é".repeat(EVENT_TYPE_CHARS);
        count_named(&mut t, 1, "github", &format!("{cut}x"));
        count_named(&mut t, 1, "github", &format!("{cut}y"));
        count_named(&mut t, 1, "github", &cut);
        let github: Vec<(String, i64)> =
            hours(&t, 1).into_iter().filter(|r| r.source == "github").map(|r| (r.event_type, r.counts[0])).collect();
        assert_eq!(github, [(OTHER_EVENT_TYPE.to_string(), 2), (cut, 1)]);
    }

    #[test]
    fn event_types_are_kept_whole_up_to_255_characters() {
        let name = |event_type: &str| {
            let (hour, _) = keys(1, 0, "s", event_type).expect("fits");
            String::from_utf8(hour.event_type.to_vec()).expect("UTF-8")
        };
        for kept in ["", "push", &"k".repeat(255), &"é".repeat(255), &"😀".repeat(255)] {
            assert_eq!(name(kept), kept, "{} bytes", kept.len());
        }
        for other in [&"k".repeat(256), &"😀".repeat(256)] {
            assert_eq!(name(other), OTHER_EVENT_TYPE, "{} bytes", other.len());
        }
    }

    /// Only a row written around `check_bounded` can hold a longer source:
    /// no key, so no cut name (`count()` counts it in the overflow entry).
    #[test]
    fn a_source_too_long_to_keep_whole_gets_no_key() {
        assert!(keys(1, 0, &"s".repeat(SOURCE_BYTES), "e").is_some());
        assert!(keys(1, 0, &"s".repeat(SOURCE_BYTES + 1), "e").is_none());
    }

    /// A flush of one database re-adds the others' entries: long names
    /// survive it whole and are still found.
    #[test]
    fn a_flush_keeps_the_other_databases_long_names_whole() {
        let mut t = table();
        let source = "😀".repeat(255);
        let event_type = "é".repeat(255);
        count_named(&mut t, 1, "mine", "e");
        count_named(&mut t, 2, &source, &event_type);
        let mut taken = Vec::with_capacity(CAPACITY);
        t.take(1, 0, &mut taken);
        count_named(&mut t, 2, &source, &event_type);
        let kept = rows(&t, 2);
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|r| r.source == source && r.counts[0] == 2));
        assert_eq!(kept[0].event_type, event_type);
    }

    /// A buffer is grown until it holds every entry in use, however many
    /// were made while the lock was let go.
    #[test]
    fn with_room_makes_room_for_every_entry_in_use() {
        use std::cell::{Ref, RefCell};
        let t = RefCell::new(table());
        for i in 0..100 {
            count_named(&mut t.borrow_mut(), 1, &format!("s{i}"), "e");
        }
        count_named(&mut t.borrow_mut(), 2, "other", "e");
        let mut buffer = Vec::new();
        let mut locks = 0;
        with_room(
            &mut buffer,
            || {
                locks += 1;
                if locks == 2 {
                    // made between the sizing and the copy: more than the slack
                    for i in 0..=ROOM_SLACK {
                        count_named(&mut t.borrow_mut(), 1, &format!("late{i}"), "e");
                    }
                }
                Ref::map(t.borrow(), |t| &**t)
            },
            |t, out| t.copy(1, out),
        );
        assert_eq!(locks, 3, "sized twice, then copied");
        assert_eq!(buffer.len(), 2 * (100 + ROOM_SLACK + 1), "hours and minutes, none missed");
        // room already there: one lock
        let mut locks = 0;
        buffer.clear();
        with_room(
            &mut buffer,
            || {
                locks += 1;
                Ref::map(t.borrow(), |t| &**t)
            },
            |t, out| t.copy(2, out),
        );
        assert_eq!((locks, buffer.len()), (1, 2));
    }

    /// docs/metrics.md states the table's size.
    #[test]
    fn the_documented_shared_memory_size_is_the_tables() {
        let bytes = size_of::<Table>();
        let mut digits = bytes.to_string();
        let len = digits.len();
        for at in (1..len).rev().filter(|i| (len - i) % 3 == 0) {
            digits.insert(at, ',');
        }
        let docs = include_str!("../../../docs/metrics.md").split_whitespace().collect::<Vec<_>>().join(" ");
        let said = format!("a fixed block of {digits} bytes");
        assert!(docs.contains(&said), "docs/metrics.md should say {said}");
        assert_eq!(size_of::<Entry>() * CAPACITY + 24, bytes);
    }

    mod names {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Whatever prefix two names share, distinct sources never share
            /// an entry, every entry's names are the exact ones counted, and
            /// event types past the bound all count as (other).
            #[test]
            fn distinct_names_are_never_merged(
                source_prefix in "[a-zé😀]{0,240}",
                type_prefix in "[a-z.é😀]{0,300}",
                suffixes in proptest::collection::vec("[a-z0-9]{1,6}", 2),
            ) {
                prop_assume!(suffixes[0] != suffixes[1]);
                let sources = [format!("{source_prefix}{}", suffixes[0]), format!("{source_prefix}{}", suffixes[1])];
                let types = [format!("{type_prefix}{}", suffixes[0]), format!("{type_prefix}{}", suffixes[1])];
                let mut t = table();
                let counted = [(0, 0), (1, 1), (0, 1), (0, 1)];
                for (s, e) in counted {
                    count_named(&mut t, 1, &sources[s], &types[e]);
                }
                let name = |e: usize| if types[e].chars().count() <= EVENT_TYPE_CHARS { types[e].clone() } else { OTHER_EVENT_TYPE.to_string() };
                let mut expected: Vec<(String, String, i64)> = Vec::new();
                for (s, e) in counted {
                    match expected.iter_mut().find(|x| x.0 == sources[s] && x.1 == name(e)) {
                        Some(x) => x.2 += 1,
                        None => expected.push((sources[s].clone(), name(e), 1)),
                    }
                }
                expected.sort();
                let mut got: Vec<(String, String, i64)> =
                    hours(&t, 1).into_iter().map(|r| (r.source, r.event_type, r.counts[0])).collect();
                got.sort();
                prop_assert_eq!(got, expected);
                let mut minute_sources: Vec<(String, i64)> = minutes(&t, 1).into_iter().map(|r| (r.source, r.counts[0])).collect();
                minute_sources.sort();
                let mut want = vec![(sources[0].clone(), 3), (sources[1].clone(), 1)];
                want.sort();
                prop_assert_eq!(minute_sources, want);
            }
        }
    }

    /// Not a check: `cargo test --release --lib --no-default-features
    /// --features pg15 metrics::tests::bench_count -- --ignored --nocapture`
    /// prints what the pure table costs (the LWLock, the clock and SPI
    /// aside): a count of an existing entry, a count that creates its
    /// entries (the scans of `usage` and `event_types`), and a flush's
    /// `take`, with short and with 200-byte sources.
    #[test]
    #[ignore]
    fn bench_count() {
        use std::time::{Duration, Instant};
        println!("size_of Table {} Entry {} Stored {}", size_of::<Table>(), size_of::<Entry>(), size_of::<Stored>());
        let c = counts(&[Counter::Deliveries, Counter::FirstClaims]);
        let types: Vec<String> = ["push", "pull_request", "issues", "customer.subscription.updated", "invoice.paid"]
            .map(String::from)
            .to_vec();
        for (label, width) in [("short", 0usize), ("200-byte", 200)] {
            let long = "x".repeat(width);
            // 20 sources x 5 event types: 20 hour entries and 20 minute ones
            let sources: Vec<String> = (0..20).map(|i| format!("{long}src{i}")).collect();
            let mut t = table();
            let n = 1_000_000;
            let start = Instant::now();
            for i in 0..n {
                let (hour, minute) = keys(1, 0, &sources[i % sources.len()], &types[i % types.len()]).unwrap();
                t.count(&hour, &minute, &c, Known::Yes).unwrap();
            }
            let hot = start.elapsed().as_nanos() as f64 / n as f64;
            // 300 new sources a round (600 entries with their minutes), on a
            // table whose pages were all touched once, as shared memory's
            // are after a backend's first scans; then their take, into a
            // buffer used before (the worker's flushes) and a fresh one
            let mut t = table();
            let mut out = Vec::with_capacity(CAPACITY);
            t.take(1, 0, &mut out);
            let (rounds, made) = (10, 300);
            let names: Vec<String> = (0..made).map(|i| format!("{long}new{i}")).collect();
            let (mut create, mut take) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..rounds {
                out.clear();
                let start = Instant::now();
                for name in &names {
                    let (hour, minute) = keys(1, 0, name, "e").unwrap();
                    t.count(&hour, &minute, &c, Known::Yes).unwrap();
                }
                create += start.elapsed();
                let start = Instant::now();
                t.take(1, 0, &mut out);
                take += start.elapsed();
            }
            let taken = out.len();
            for name in &names {
                let (hour, minute) = keys(1, 0, name, "e").unwrap();
                t.count(&hour, &minute, &c, Known::Yes).unwrap();
            }
            // as flush() does: room made before the lock is taken
            let t = std::cell::RefCell::new(t);
            let mut fresh = Vec::new();
            let start = Instant::now();
            let locked = with_room(
                &mut fresh,
                || std::cell::RefMut::map(t.borrow_mut(), |t| &mut **t),
                |mut t, out| {
                    let start = Instant::now();
                    t.take(1, 0, out);
                    start.elapsed()
                },
            );
            let fresh_all = start.elapsed();
            println!(
                "{label} sources: count {hot:.0} ns (existing entries), {:.0} ns (creating them); take of {taken} \
                 entries {:.0} us (buffer reused); with a fresh buffer {:.0} us under the lock, {:.0} us in all",
                create.as_nanos() as f64 / (rounds * made) as f64,
                take.as_micros() as f64 / rounds as f64,
                locked.as_micros() as f64,
                fresh_all.as_micros() as f64,
            );
        }
    }
}
