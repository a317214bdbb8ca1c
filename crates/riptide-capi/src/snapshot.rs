//! Snapshots: consistent read-only views of a database, for read options and transactions.
//!
//! A snapshot handle holds a reference to the engine's snapshot (which keeps compaction from
//! dropping the versions it sees) and the id of its database, so that reading another database
//! at it is reported as misuse. Releasing the handle drops only its own reference: read options
//! and iterators made with it keep theirs. Closing the database releases its snapshot handles.
//!
//! Concurrency contract: snapshots are immutable and thread-safe.

use std::sync::{Arc, Weak};

use riptide_engine::Snapshot;

use crate::db::{with_db, DbObject};
use crate::error::{call, CapiError};
use crate::handle::{self, Kind};
use crate::memory::out;
use crate::{from_handle, riptide_code_t, riptide_db_t, riptide_error_t, riptide_snapshot_t, to_handle};

/// What a `riptide_snapshot_t` handle names.
pub(crate) struct SnapshotObject {
    pub(crate) db_id: u64,
    pub(crate) snapshot: Snapshot,
    pub(crate) parent: Weak<DbObject>,
}

/// Registers `snapshot` of the database `object` as a new handle, a child of that database.
pub(crate) fn adopt_snapshot(object: &Arc<DbObject>, snapshot: Snapshot) -> Result<*mut riptide_snapshot_t, CapiError> {
    let child = Arc::new(SnapshotObject { db_id: object.id, snapshot, parent: Arc::downgrade(object) });
    object.adopt(Kind::Snapshot, child).map(from_handle)
}

/// Takes a snapshot of the current state of every column family; release it with
/// `riptide_snapshot_release`.
///
/// # Safety
/// `out_snapshot` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_snapshot_create(
    db: *const riptide_db_t,
    out_snapshot: *mut *mut riptide_snapshot_t,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_snapshot, "out_snapshot") }?;
        *slot = with_db(db, |object, db| adopt_snapshot(object, db.snapshot()))?;
        Ok(())
    })
}

/// Releases a snapshot handle. `RIPTIDE_MISUSE` for NULL, a second release, or a snapshot
/// whose database was closed (closing released it).
#[no_mangle]
pub extern "C" fn riptide_snapshot_release(snapshot: *mut riptide_snapshot_t) -> riptide_code_t {
    call(std::ptr::null_mut(), || {
        let handle = to_handle(snapshot);
        let object = handle::remove::<SnapshotObject>(handle, Kind::Snapshot)?;
        if let Some(parent) = object.parent.upgrade() {
            parent.disown(handle);
        }
        Ok(())
    })
}

/// The sequence number the snapshot reads at: it sees every write up to and including it.
///
/// # Safety
/// `out_sequence` must be valid for a write; `err` NULL or a `riptide_error_t *` variable.
#[no_mangle]
pub unsafe extern "C" fn riptide_snapshot_sequence(
    snapshot: *const riptide_snapshot_t,
    out_sequence: *mut u64,
    err: *mut *mut riptide_error_t,
) -> riptide_code_t {
    call(err, || {
        // SAFETY: by the function's contract.
        let slot = unsafe { out(out_sequence, "out_sequence") }?;
        *slot = handle::get::<SnapshotObject>(to_handle(snapshot), Kind::Snapshot)?.snapshot.sequence();
        Ok(())
    })
}
