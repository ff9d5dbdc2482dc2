//! The bounded wait of a delivery whose key another worker is processing
//! (`in_progress`): `webhook_receive(..., wait => ...)` looks at the key,
//! and while its holder's lease is live it sleeps until the holder's
//! transaction commits a change to the key, the lease runs out, or the
//! wait ends, then claims as usual. A holder that completes in time turns
//! the answer from a 503 into the duplicate's 200 with the stored result
//! (senders retry at once while the first attempt still runs, and some of
//! them drop or count a non-2xx).
//!
//! How, and why so:
//! - **Nothing the holder needs is held while sleeping.** The wait comes
//!   before the call writes anything to the key (a claim that records its
//!   delivery locks the row until commit; a recent duplicate is a read,
//!   `crate::engine::claim::read_answer`, but not every one is), and it takes no advisory lock: the
//!   holder's completion never waits for a waiter. Each look reads the key
//!   with the latest snapshot, without a lock, in a memory context of its
//!   own. It waits only in a transaction that had not written before the
//!   call (else it may hold the key's row lock itself) and that reads the
//!   latest data (READ COMMITTED: under REPEATABLE READ the claim could
//!   not see the holder's completion, and would end in 40001). A copy that
//!   found the key claimed by another copy after its first look waits again
//!   after the replay guard (`crate::store::replay_guards`) locked its
//!   guard row: a third copy of the same body waits for that row, never
//!   the holder. Distributed on Citus, the look reads the source's shard
//!   without the shard's metadata lock (`crate::store::local_shard::
//!   readable`), which Citus takes for writes only; a second wait comes
//!   after the call's first write (the guard row, the claim's attempt) and
//!   holds that lock, as any write of a Citus transaction does until it
//!   ends: a shard move of the source waits for it, at most the wait.
//! - **Woken at the holder's commit.** Shared memory holds [`SLOTS`]
//!   condition variables (PostgreSQL's `ConditionVariable`: a spinlock and
//!   a list of sleeping processes), one per hash of (source, key). A
//!   transaction that moves a key out of `processing` (complete, fail,
//!   mark unknown, resolve, forget; the lease sweep and a reclaim only
//!   touch expired leases, which the waiter's own timer catches) notes the key's slot
//!   ([`wake_at_commit`]) and broadcasts it from its commit callback,
//!   which PostgreSQL calls after the commit is visible to new snapshots
//!   (`CommitTransaction` ends the transaction in the proc array before
//!   `CallXactCallbacks(XACT_EVENT_COMMIT)`). Two keys that share a slot
//!   only cost a waiter one more look.
//! - **Never only woken.** Each sleep also ends by time: at the holder's
//!   lease expiry (the key can then be reclaimed), at the wait's end, and
//!   at most every [`POLL_MS`] ms, so a change no broadcast announces (an
//!   operator's own UPDATE, a commit on another Citus node) is seen within
//!   that time; without the library preloaded there are no slots and the
//!   wait looks every [`POLL_WITHOUT_SHMEM_MS`] ms.
//! - **No busy loop, and interruptible**: the sleep is `WaitLatch` (inside
//!   `ConditionVariableTimedSleep`), which a cancel, `statement_timeout`
//!   or termination wakes; `CHECK_FOR_INTERRUPTS` then ends the call with
//!   its error at once.

use crate::store::Key;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicPtr, Ordering};

/// Condition variables in shared memory (16 bytes each).
pub const SLOTS: usize = 1024;
/// The longest sleep between two looks, in milliseconds, with the
/// condition variables (a broadcast announces every change the extension
/// makes; the poll is for the others: measured, a look costs about 150 µs
/// of CPU, so a 2 s wait polled every 100 ms cost 3.4 ms).
pub const POLL_MS: i64 = 500;
/// The same without them (the library not preloaded): only the poll sees
/// a change.
pub const POLL_WITHOUT_SHMEM_MS: i64 = 100;

const SHMEM_NAME: &CStr = c"webhook_dedup_waiters";

/// The first of the [`SLOTS`] condition variables; null without
/// `shared_preload_libraries`.
static FIRST: AtomicPtr<pg_sys::ConditionVariable> = AtomicPtr::new(std::ptr::null_mut());

/// Ask for the slots' space (from [`crate::shmem`]).
pub(crate) fn request() {
    // SAFETY: called while the postmaster sizes shared memory.
    unsafe { pg_sys::RequestAddinShmemSpace(std::mem::size_of::<pg_sys::ConditionVariable>() * SLOTS) };
}

/// Find (or make) the slots (from [`crate::shmem`]).
///
/// # Safety
/// Called with `AddinShmemInitLock` held, after [`request`].
pub(crate) unsafe fn attach() {
    // SAFETY: the requested space, initialised once (by the first process
    // to find it missing) with ConditionVariableInit, as PostgreSQL's own
    // users of condition variables in shared memory do.
    unsafe {
        let mut found = false;
        let size = std::mem::size_of::<pg_sys::ConditionVariable>() * SLOTS;
        let first = pg_sys::ShmemInitStruct(SHMEM_NAME.as_ptr(), size, &mut found).cast::<pg_sys::ConditionVariable>();
        if !found {
            for i in 0..SLOTS {
                pg_sys::ConditionVariableInit(first.add(i));
            }
        }
        FIRST.store(first, Ordering::Release);
    }
}

/// The slot of `key`: a hash that every process of one build computes
/// alike (`DefaultHasher::new` has fixed keys).
fn slot(key: Key<'_>) -> usize {
    let mut hasher = std::hash::DefaultHasher::new();
    key.source.hash(&mut hasher);
    key.idem_key.hash(&mut hasher);
    (hasher.finish() % SLOTS as u64) as usize
}

fn condition_variable(slot: usize) -> Option<*mut pg_sys::ConditionVariable> {
    let first = FIRST.load(Ordering::Acquire);
    // SAFETY: slot < SLOTS, within the space attach found.
    (!first.is_null()).then(|| unsafe { first.add(slot) })
}

thread_local! {
    /// The slots to broadcast when the current transaction commits, one
    /// bit each (a transaction that completes many keys sets each once).
    static PENDING: RefCell<[u64; SLOTS / 64]> = const { RefCell::new([0; SLOTS / 64]) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Wake the calls waiting for `key` once the current transaction commits
/// (nothing on abort). Called by every transition that moves a key out of
/// `processing`; costs a bit here and, at commit, a spinlock per slot.
pub fn wake_at_commit(key: Key<'_>) {
    if FIRST.load(Ordering::Acquire).is_null() {
        return;
    }
    let slot = slot(key);
    PENDING.with_borrow_mut(|pending| pending[slot / 64] |= 1 << (slot % 64));
    if !REGISTERED.get() {
        // SAFETY: registers a callback with static lifetime, once per backend.
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
        REGISTERED.set(true);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            let pending = PENDING.with_borrow_mut(std::mem::take);
            for (word, bits) in pending.iter().enumerate() {
                let mut bits = *bits;
                while bits != 0 {
                    let slot = word * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(cv) = condition_variable(slot) {
                        // SAFETY: a condition variable in shared memory; the
                        // broadcast takes its spinlock and sets the sleepers'
                        // latches, nothing that can raise.
                        unsafe { pg_sys::ConditionVariableBroadcast(cv) };
                    }
                }
            }
        }
        // A prepared transaction commits later, maybe elsewhere: its
        // waiters see it by polling.
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_PREPARE => {
            PENDING.with_borrow_mut(|pending| *pending = [0; SLOTS / 64]);
        }
        _ => {}
    }
}

/// What a look at the key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Stop waiting: the key is no longer held by a live lease (or was
    /// never held, or by this very transaction).
    Done,
    /// Still held; nothing changes by itself before this time
    /// (microseconds since 2000: the lease's expiry).
    HeldUntil(i64),
}

/// Sleep while `look` says the key is held, at most until `deadline`
/// (microseconds since 2000, the database clock). `look` is called first
/// and after every wake-up with the clock's time. Returns whether the wait
/// ended because the key was released (else the deadline passed).
pub fn wait(key: Key<'_>, deadline: i64, mut look: impl FnMut(i64) -> Look) -> bool {
    let cv = condition_variable(slot(key));
    // Prepared before the first look, so that a broadcast between the look
    // and the sleep is not missed (the pattern PostgreSQL documents for
    // ConditionVariablePrepareToSleep).
    let _sleeping = cv.map(|cv| {
        // SAFETY: a condition variable in shared memory; the guard cancels
        // the sleep on every way out (an ERROR in `look` or a cancel
        // unwinds through it; the aborting transaction would cancel it too).
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
        Sleeping
    });
    loop {
        let now = crate::time::clock_now();
        let until = match look(now) {
            Look::Done => return true,
            Look::HeldUntil(expiry) => expiry.min(deadline),
        };
        if now >= deadline {
            return false;
        }
        // Until the lease's expiry (plus a millisecond, so that the next
        // look finds it expired), the deadline, or the poll, whichever is
        // first.
        let poll = if cv.is_some() { POLL_MS } else { POLL_WITHOUT_SHMEM_MS };
        let timeout_ms = ((until.saturating_sub(now) + 999) / 1000 + i64::from(until < deadline)).clamp(1, poll);
        match cv {
            // SAFETY: prepared above; returns on a broadcast, the timeout or
            // a set latch, after CHECK_FOR_INTERRUPTS.
            Some(cv) => unsafe {
                pg_sys::ConditionVariableTimedSleep(cv, timeout_ms as _, pg_sys::PG_WAIT_EXTENSION);
            },
            // SAFETY: the backend's own latch, as any wait in a backend.
            None => unsafe {
                pg_sys::WaitLatch(
                    pg_sys::MyLatch,
                    (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                    timeout_ms as _,
                    pg_sys::PG_WAIT_EXTENSION,
                );
                pg_sys::ResetLatch(pg_sys::MyLatch);
                pg_sys::check_for_interrupts!();
            },
        }
    }
}

/// Cancels the prepared sleep when dropped.
struct Sleeping;

impl Drop for Sleeping {
    fn drop(&mut self) {
        // SAFETY: cancels this process's prepared sleep, if any.
        #[allow(clippy::let_unit_value)] // a bool from PostgreSQL 16 on
        let _ = unsafe { pg_sys::ConditionVariableCancelSleep() };
    }
}
