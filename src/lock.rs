//! The extension's advisory locks. Keys need none (their rows are locked,
//! see [`crate::store`]); what remains is the lock that keeps two
//! maintenance passes from overlapping.

use pgrx::pg_sys;

/// `objsubid` of this extension's advisory locks in `pg_locks` (`'WD'` + 1
/// = 22341); `pg_advisory_lock()` uses 1 and 2, so a caller's own advisory
/// locks never collide with ours.
pub const LOCK_CLASS: u16 = 0x5744 + 1;

/// Lock id (within [`LOCK_CLASS`]) of the maintenance pass.
const MAINTENANCE: u32 = 1;

/// Try to take the maintenance lock until the transaction ends, as
/// `pg_try_advisory_xact_lock` does: false, without waiting, when another
/// pass holds it.
pub fn try_maintenance() -> bool {
    // SAFETY: the tag is initialised as SET_LOCKTAG_ADVISORY (storage/lock.h)
    // does; dontWait = true makes LockAcquire return LOCKACQUIRE_NOT_AVAIL
    // instead of waiting; sessionLock = false ties it to the transaction.
    unsafe {
        let tag = pg_sys::LOCKTAG {
            locktag_field1: pg_sys::MyDatabaseId.to_u32(),
            locktag_field2: 0,
            locktag_field3: MAINTENANCE,
            locktag_field4: LOCK_CLASS,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false, true)
            != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
    }
}
