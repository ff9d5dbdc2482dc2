//! The library's shared memory: the hooks that ask for it and find it,
//! for each module that keeps something there ([`crate::metrics`]'s
//! counter table, [`crate::wait`]'s condition variables). Only while the
//! library is in `shared_preload_libraries`; each module works without
//! its part otherwise (and says what it then does instead).

use pgrx::pg_sys;
use pgrx::prelude::*;

#[cfg(not(any(feature = "pg13", feature = "pg14")))]
static mut PREVIOUS_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREVIOUS_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Install the hooks; called from `_PG_init` while preloading.
pub fn init() {
    // SAFETY: hooks are installed once, in _PG_init of the postmaster while
    // it loads shared_preload_libraries; the previous hooks are kept and
    // called.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14"))]
        request();
        #[cfg(not(any(feature = "pg13", feature = "pg14")))]
        {
            PREVIOUS_REQUEST = pg_sys::shmem_request_hook;
            pg_sys::shmem_request_hook = Some(on_shmem_request);
        }
        PREVIOUS_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(on_shmem_startup);
    }
}

/// Ask for every module's space and locks (in `shmem_request_hook` from
/// PostgreSQL 15 on, before in `_PG_init` itself).
fn request() {
    crate::metrics::request();
    crate::wait::request();
}

#[cfg(not(any(feature = "pg13", feature = "pg14")))]
#[pg_guard]
unsafe extern "C-unwind" fn on_shmem_request() {
    // SAFETY: the hook saved in init, called as PostgreSQL would have;
    // another extension's ERROR (a longjmp) is not let across these Rust
    // frames.
    unsafe {
        if let Some(previous) = PREVIOUS_REQUEST {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous());
        }
    }
    request();
}

#[pg_guard]
unsafe extern "C-unwind" fn on_shmem_startup() {
    // SAFETY: as in on_shmem_request.
    unsafe {
        if let Some(previous) = PREVIOUS_STARTUP {
            pg_sys::ffi::pg_guard_ffi_boundary(|| previous());
        }
    }
    // SAFETY: every module's ShmemInitStruct under AddinShmemInitLock, as
    // PostgreSQL's own modules do (`AddinShmemInitLock` is
    // `&MainLWLockArray[21].lock` in every supported version,
    // lwlocknames.txt; pgrx uses the same); `request` asked for the space.
    unsafe {
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        crate::metrics::attach();
        crate::wait::attach();
        pg_sys::LWLockRelease(init_lock);
    }
}
