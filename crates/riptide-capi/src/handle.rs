//! The handle registry: every object the C side holds is named by an opaque 64-bit handle,
//! never by a pointer to Rust memory.
//!
//! A handle's value packs three things: a tag byte (`0xA0 | kind`) in bits 0-7, the index of a
//! slot in the registry in bits 8-31, and the slot's generation in bits 32-63. The C side sees
//! it as a pointer to an incomplete struct type and never dereferences it; the Rust side never
//! dereferences it either: it decodes the value and looks the slot up. A slot's generation is
//! bumped every time an object is stored in it, so a handle that was closed (or a copy of it,
//! or a value that was never a handle) cannot reach the object now in that slot: the lookup
//! fails with a misuse error. A slot whose generation would wrap is retired for good, so no
//! handle value ever names two objects. Slots live in segments that are allocated on demand and
//! never freed, so the lookup itself only ever reads memory that stays valid; this is what
//! makes use after close and double close sound, not just likely to be caught.
//!
//! Concurrency contract: lookups take a slot's read lock just long enough to clone the
//! object's `Arc`; inserting and removing take its write lock. No slot lock is ever held while
//! another lock is taken or while engine code runs, so the registry cannot take part in a
//! deadlock. An object removed while another thread is using it stays alive (through that
//! thread's `Arc`) until the call in flight returns.

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use parking_lot::RwLock;

use crate::error::CapiError;

#[cfg(not(target_pointer_width = "64"))]
compile_error!("the Riptide C ABI encodes handles in 64-bit pointers: build it for a 64-bit target");

/// What a handle names; part of the handle value, so a handle of one kind passed where another
/// is expected is told apart from a stale one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Kind {
    Options = 1,
    CfOptions = 2,
    ReadOptions = 3,
    WriteOptions = 4,
    TxnOptions = 5,
    Db = 6,
    ColumnFamily = 7,
    Snapshot = 8,
    Batch = 9,
    Iterator = 10,
    Transaction = 11,
    Pinnable = 12,
    Error = 13,
    BackupEngine = 14,
}

impl Kind {
    const ALL: [Kind; 14] = [
        Kind::Options,
        Kind::CfOptions,
        Kind::ReadOptions,
        Kind::WriteOptions,
        Kind::TxnOptions,
        Kind::Db,
        Kind::ColumnFamily,
        Kind::Snapshot,
        Kind::Batch,
        Kind::Iterator,
        Kind::Transaction,
        Kind::Pinnable,
        Kind::Error,
        Kind::BackupEngine,
    ];

    /// The C type name, for error messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Options => "riptide_options_t",
            Kind::CfOptions => "riptide_cf_options_t",
            Kind::ReadOptions => "riptide_readoptions_t",
            Kind::WriteOptions => "riptide_writeoptions_t",
            Kind::TxnOptions => "riptide_txn_options_t",
            Kind::Db => "riptide_db_t",
            Kind::ColumnFamily => "riptide_cf_t",
            Kind::Snapshot => "riptide_snapshot_t",
            Kind::Batch => "riptide_batch_t",
            Kind::Iterator => "riptide_iterator_t",
            Kind::Transaction => "riptide_txn_t",
            Kind::Pinnable => "riptide_pinnable_t",
            Kind::Error => "riptide_error_t",
            Kind::BackupEngine => "riptide_backup_engine_t",
        }
    }

    fn tag(self) -> u64 {
        TAG_MAGIC | self as u64
    }

    fn from_tag(tag: u64) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.tag() == tag)
    }
}

/// The high nibble of every tag byte; a pointer to real memory rarely ends in it.
const TAG_MAGIC: u64 = 0xA0;
const SEGMENT_SLOTS: usize = 4096;
const MAX_SEGMENTS: usize = 4096;
/// At most 2^24 handles are open at once (index bits 8-31).
const MAX_SLOTS: usize = SEGMENT_SLOTS * MAX_SEGMENTS;

type Object = Arc<dyn Any + Send + Sync>;

struct SlotState {
    generation: u32,
    object: Option<Object>,
}

struct Slot {
    state: RwLock<SlotState>,
}

struct FreeSlots {
    free: Vec<u32>,
    next: u32,
}

/// Segments are allocated on first use and never freed (see the module documentation).
static SEGMENTS: [OnceLock<Box<[Slot]>>; MAX_SEGMENTS] = [const { OnceLock::new() }; MAX_SEGMENTS];
static FREE: Mutex<FreeSlots> = Mutex::new(FreeSlots { free: Vec::new(), next: 0 });

fn slot(index: usize) -> Option<&'static Slot> {
    let segment = SEGMENTS.get(index / SEGMENT_SLOTS)?.get()?;
    segment.get(index % SEGMENT_SLOTS)
}

fn allocate_index() -> Result<usize, CapiError> {
    let mut free = FREE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(index) = free.free.pop() {
        return Ok(index as usize);
    }
    let index = free.next as usize;
    if index >= MAX_SLOTS {
        return Err(CapiError::busy("too many open Riptide handles (16,777,216): close some"));
    }
    SEGMENTS[index / SEGMENT_SLOTS].get_or_init(|| {
        (0..SEGMENT_SLOTS).map(|_| Slot { state: RwLock::new(SlotState { generation: 0, object: None }) }).collect()
    });
    free.next += 1;
    Ok(index)
}

fn release_index(index: usize, generation: u32) {
    // A slot whose generation is exhausted is never reused, so its handles stay stale forever.
    if generation != u32::MAX {
        FREE.lock().unwrap_or_else(PoisonError::into_inner).free.push(index as u32);
    }
}

/// Stores `object` and returns its new handle value (never 0).
pub(crate) fn insert<T: Any + Send + Sync>(kind: Kind, object: Arc<T>) -> Result<u64, CapiError> {
    let index = allocate_index()?;
    let slot = slot(index).ok_or_else(|| CapiError::panic("registry segment missing after allocation"))?;
    let mut state = slot.state.write();
    state.generation += 1;
    state.object = Some(object);
    Ok(((state.generation as u64) << 32) | ((index as u64) << 8) | kind.tag())
}

/// Decodes `handle` as a `kind` handle: its slot index and generation, or the misuse.
fn decode(handle: u64, kind: Kind) -> Result<(usize, u32), CapiError> {
    if handle == 0 {
        return Err(CapiError::misuse(format!("NULL {} handle", kind.name())));
    }
    let tag = handle & 0xFF;
    if tag != kind.tag() {
        return Err(match Kind::from_tag(tag) {
            Some(other) => {
                CapiError::misuse(format!("a {} was passed where a {} is expected", other.name(), kind.name()))
            }
            None => CapiError::misuse(format!("not a Riptide handle where a {} is expected", kind.name())),
        });
    }
    Ok((((handle >> 8) & 0xFF_FFFF) as usize, (handle >> 32) as u32))
}

fn stale(kind: Kind) -> CapiError {
    CapiError::misuse(format!("{} handle used after it was closed or destroyed (or never valid)", kind.name()))
}

fn downcast<T: Any + Send + Sync>(object: Object, kind: Kind) -> Result<Arc<T>, CapiError> {
    object.downcast::<T>().map_err(|_| CapiError::panic(format!("registry holds a wrong type for {}", kind.name())))
}

/// The object a live `kind` handle names.
pub(crate) fn get<T: Any + Send + Sync>(handle: u64, kind: Kind) -> Result<Arc<T>, CapiError> {
    let (index, generation) = decode(handle, kind)?;
    let slot = slot(index).ok_or_else(|| stale(kind))?;
    let object = {
        let state = slot.state.read();
        match &state.object {
            Some(object) if state.generation == generation => Arc::clone(object),
            _ => return Err(stale(kind)),
        }
    };
    downcast(object, kind)
}

/// Removes a live `kind` handle and returns its object; the handle is stale from now on. The
/// caller drops the object outside every registry lock.
pub(crate) fn remove<T: Any + Send + Sync>(handle: u64, kind: Kind) -> Result<Arc<T>, CapiError> {
    let (index, generation) = decode(handle, kind)?;
    let slot = slot(index).ok_or_else(|| stale(kind))?;
    let object = {
        let mut state = slot.state.write();
        if state.generation != generation || state.object.is_none() {
            return Err(stale(kind));
        }
        state.object.take()
    };
    release_index(index, generation);
    downcast(object.ok_or_else(|| stale(kind))?, kind)
}

/// Removes `handle` whatever its kind, if it is still live (used when a parent closes its
/// children). Returns the object so that the caller drops it outside the registry's locks.
pub(crate) fn remove_any(handle: u64) -> Option<Object> {
    let kind = Kind::from_tag(handle & 0xFF)?;
    let (index, generation) = decode(handle, kind).ok()?;
    let slot = slot(index)?;
    let object = {
        let mut state = slot.state.write();
        if state.generation != generation {
            return None;
        }
        state.object.take()?
    };
    release_index(index, generation);
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_go_stale_on_removal_and_are_typed() {
        let handle = insert(Kind::Batch, Arc::new(7u32)).unwrap();
        assert_ne!(handle, 0);
        assert_eq!(*get::<u32>(handle, Kind::Batch).unwrap(), 7);
        assert!(get::<u32>(handle, Kind::Db).unwrap_err().message.contains("riptide_batch_t"));
        assert_eq!(*remove::<u32>(handle, Kind::Batch).unwrap(), 7);
        assert!(get::<u32>(handle, Kind::Batch).is_err());
        assert!(remove::<u32>(handle, Kind::Batch).is_err());
        // The slot is reused under a new generation: the old handle stays stale.
        let again = insert(Kind::Batch, Arc::new(8u32)).unwrap();
        assert!(get::<u32>(handle, Kind::Batch).is_err());
        assert_eq!(*get::<u32>(again, Kind::Batch).unwrap(), 8);
        assert!(remove_any(again).is_some());
        assert!(remove_any(again).is_none());
        assert!(get::<u32>(0, Kind::Batch).unwrap_err().message.contains("NULL"));
        assert!(get::<u32>(0x1234_5678_9000, Kind::Batch).is_err());
    }
}
