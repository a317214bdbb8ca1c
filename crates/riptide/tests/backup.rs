//! Backups (`BackupEngine`): incremental (shared tables stored once), restorable into a fresh
//! directory that opens with the contents at the backup's point, verifiable, and deletable
//! without losing what other backups share; damage is reported with the file, and a backup
//! interrupted half-way does not exist.

mod common;

use std::path::Path;
use std::sync::Arc;

use riptide::fs::{FaultFileSystem, FaultKind, FaultPlan, FileSystem, MemFileSystem};
use riptide::{BackupEngine, ColumnFamilyOptions, Db, Error, Options, ReadOptions, WriteBatch};

use common::{dump, dump_cf, key, small_options, value};

fn options(file_system: Arc<dyn FileSystem>) -> Options {
    Options { min_blob_size_bytes: Some(200), ..small_options(file_system) }
}

fn write_range(db: &Db, range: std::ops::Range<u64>, version: u64) {
    for number in range {
        let length_bytes = if number % 4 == 0 { 300 } else { 40 };
        let mut batch = WriteBatch::new();
        batch.put(&key(number), &value(number, version, length_bytes));
        db.write(batch).unwrap();
    }
}

/// Bytes stored under `dir/shared`.
fn shared_bytes(memory: &MemFileSystem, dir: &str) -> u64 {
    let shared = Path::new(dir).join("shared");
    memory.list(&shared).unwrap().iter().map(|name| memory.file_size(&shared.join(name)).unwrap()).sum()
}

#[test]
fn backups_are_incremental_and_each_restores_to_its_point() {
    let memory = MemFileSystem::new();
    let file_system: Arc<dyn FileSystem> = Arc::new(memory.clone());
    let db = Db::open("/db", options(Arc::clone(&file_system))).unwrap();
    let family = db.create_column_family("second", ColumnFamilyOptions::default()).unwrap();
    write_range(&db, 0..2_000, 1);
    db.put_cf(&family, b"in second", b"1").unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let backups = BackupEngine::open("/backups", Arc::clone(&file_system)).unwrap();
    let first = backups.create_backup(&db).unwrap();
    let first_contents = dump(&db, &ReadOptions::default());
    let after_first = shared_bytes(&memory, "/backups");
    assert_eq!(first.id, 1);
    assert!(after_first > 0);

    // A few more writes (some only in the log): the second backup stores little that is new.
    write_range(&db, 2_000..2_100, 1);
    db.put_cf(&family, b"in second", b"2").unwrap();
    let second = backups.create_backup(&db).unwrap();
    let second_contents = dump(&db, &ReadOptions::default());
    let added = shared_bytes(&memory, "/backups") - after_first;
    assert_eq!(second.id, 2);
    assert!(added < after_first / 4, "the second backup stored {added} new shared bytes beside {after_first}");
    assert_eq!(backups.list_backups().unwrap().iter().map(|info| info.id).collect::<Vec<_>>(), vec![1, 2]);

    // The database goes on; each backup restores to its own point.
    write_range(&db, 0..500, 2);
    db.compact_all().unwrap();
    for (id, expected, second_value) in [(1, &first_contents, b"1"), (2, &second_contents, b"2")] {
        backups.verify_backup(id).unwrap();
        let target = format!("/restored-{id}");
        backups.restore(id, &target).unwrap();
        let restored = Db::open(&target, options(Arc::clone(&file_system))).unwrap();
        assert_eq!(&dump(&restored, &ReadOptions::default()), expected, "backup {id}");
        let restored_family = restored.column_family("second").unwrap();
        let in_second = dump_cf(&restored, &restored_family, &ReadOptions::default());
        assert_eq!(in_second.get(b"in second".as_slice()).map(Vec::as_slice), Some(second_value.as_slice()));
    }
    assert!(matches!(backups.restore(1, "/restored-1"), Err(Error::InvalidArgument(_))), "target exists");
    assert!(matches!(backups.verify_backup(9), Err(Error::InvalidArgument(_))));

    // Deleting the first backup keeps every shared file the second needs.
    backups.delete_backup(1).unwrap();
    assert_eq!(backups.list_backups().unwrap().len(), 1);
    backups.verify_backup(2).unwrap();
    backups.restore(2, "/restored-again").unwrap();
    let restored = Db::open("/restored-again", options(Arc::clone(&file_system))).unwrap();
    assert_eq!(dump(&restored, &ReadOptions::default()), second_contents);
    drop(restored);
    backups.delete_backup(2).unwrap();
    assert_eq!(shared_bytes(&memory, "/backups"), 0, "no shared file outlives every backup");
}

#[test]
fn damage_to_a_backup_is_corruption_naming_the_file_and_restores_nothing_openable() {
    let memory = MemFileSystem::new();
    let file_system: Arc<dyn FileSystem> = Arc::new(memory.clone());
    let db = Db::open("/db", options(Arc::clone(&file_system))).unwrap();
    write_range(&db, 0..1_000, 1);
    db.flush().unwrap();
    let backups = BackupEngine::open("/backups", Arc::clone(&file_system)).unwrap();
    backups.create_backup(&db).unwrap();
    let shared = Path::new("/backups/shared");
    let victim = shared.join(memory.list(shared).unwrap().into_iter().next().expect("a shared file"));
    let mut bytes = memory.read_all(&victim).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    memory.remove(&victim).unwrap();
    let mut file = memory.create(&victim).unwrap();
    file.append(&bytes).unwrap();
    file.sync().unwrap();
    drop(file);
    match backups.verify_backup(1) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, victim),
        other => panic!("expected corruption of {}, got {other:?}", victim.display()),
    }
    assert!(matches!(backups.restore(1, "/restored"), Err(Error::Corruption { .. })));
    assert!(!memory.exists(Path::new("/restored/CURRENT")), "a failed restore is not openable");
    // A damaged description is corruption too.
    let description = Path::new("/backups/meta/000001");
    let mut bytes = memory.read_all(description).unwrap();
    bytes[5] ^= 0x01;
    memory.remove(description).unwrap();
    let mut file = memory.create(description).unwrap();
    file.append(&bytes).unwrap();
    file.sync().unwrap();
    drop(file);
    assert!(matches!(backups.list_backups(), Err(Error::Corruption { .. })));
}

#[test]
fn a_backup_interrupted_by_an_io_error_does_not_exist_and_the_next_one_works() {
    let memory = MemFileSystem::new();
    let fault = FaultFileSystem::new(Arc::new(memory.clone()));
    let file_system: Arc<dyn FileSystem> = Arc::new(fault.clone());
    let db = Db::open("/db", options(Arc::clone(&file_system))).unwrap();
    write_range(&db, 0..600, 1);
    db.flush().unwrap();
    write_range(&db, 600..700, 1);
    db.wait_for_background_work().unwrap();
    let expected = dump(&db, &ReadOptions::default());
    let backups = BackupEngine::open("/backups", Arc::clone(&file_system)).unwrap();
    let before = fault.operation_count();
    backups.create_backup(&db).unwrap();
    let steps = fault.operation_count() - before;
    backups.delete_backup(1).unwrap();
    for step in 1..=steps {
        fault.set_plan(Some(FaultPlan {
            fail_at_operation: fault.operation_count() + step,
            kind: FaultKind::Eio,
            persistent: false,
            include_reads: true,
        }));
        let result = backups.create_backup(&db);
        fault.set_plan(None);
        assert!(result.is_err(), "step {step}: the injected error was not reported");
        assert!(backups.list_backups().unwrap().is_empty(), "step {step}: a failed backup is listed");
        // Reopening the engine clears what the failed backup left.
        let backups = BackupEngine::open("/backups", Arc::clone(&file_system)).unwrap();
        let info = backups.create_backup(&db).unwrap();
        let target = format!("/restored-{step}");
        backups.restore(info.id, &target).unwrap();
        let restored = Db::open(&target, options(Arc::clone(&file_system))).unwrap();
        assert_eq!(dump(&restored, &ReadOptions::default()), expected, "step {step}");
        drop(restored);
        backups.delete_backup(info.id).unwrap();
    }
}
