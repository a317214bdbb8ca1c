/* The C ABI test: calls every exported function, every misuse case the header promises to
 * catch, and the database, a transaction and iterators from several threads at once. Built
 * with -fsanitize=address,undefined against libriptide.a by tests/run-c-tests.sh; prints a
 * cargo-style "test result:" line and exits non-zero on any failure. */
#include "riptide.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int check_failures; /* failures in the current test function */

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            check_failures++;                                                          \
            fprintf(stderr, "  FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
        }                                                                              \
    } while (0)

#define EXPECT(expected, call)                                                         \
    do {                                                                               \
        riptide_code_t code_ = (call);                                                 \
        if (code_ != (expected)) {                                                     \
            check_failures++;                                                          \
            fprintf(stderr, "  FAILED %s:%d: %s returned %s, expected %s\n", __FILE__, \
                    __LINE__, #call, riptide_code_name(code_), riptide_code_name(expected)); \
        }                                                                              \
    } while (0)

#define OK(call) EXPECT(RIPTIDE_OK, call)
#define K(s) (const uint8_t *)(s), strlen(s)

static char base_dir[256];
static int dir_counter;

/* A fresh directory name for one database. */
static void new_path(char *out, size_t size) {
    snprintf(out, size, "%s/db%d", base_dir, dir_counter++);
}

static riptide_db_t *open_db(const char *path) {
    riptide_db_t *db = NULL;
    riptide_options_t *options = NULL;
    OK(riptide_options_create(&options, NULL));
    /* Small memtables so that flushes and compactions happen in tests. */
    OK(riptide_options_set_memtable_size_bytes(options, 64 * 1024, NULL));
    OK(riptide_options_set_max_memory_bytes(options, 64u << 20, NULL));
    OK(riptide_open(path, options, &db, NULL));
    OK(riptide_options_destroy(options));
    return db;
}

/* Checks that the value of key is expected (NULL: absent), through riptide_get. */
static void expect_value(riptide_db_t *db, riptide_readoptions_t *ro, const char *key, const char *expected) {
    uint8_t *value = (uint8_t *)1;
    size_t len = 99;
    OK(riptide_get(db, ro, K(key), &value, &len, NULL));
    if (expected == NULL) {
        CHECK(value == NULL && len == 0);
    } else {
        CHECK(value != NULL && len == strlen(expected) && memcmp(value, expected, len) == 0);
    }
    riptide_free(value);
}

static void test_version(void) {
    CHECK(riptide_version() == RIPTIDE_ABI_VERSION);
    CHECK(strstr(riptide_version_string(), "ABI 1") != NULL);
}

static void test_errors(void) {
    riptide_error_t *err = NULL;
    riptide_options_t *options = NULL;
    OK(riptide_options_create(&options, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_compression(options, 42, &err));
    CHECK(err != NULL);
    CHECK(riptide_error_code(err) == RIPTIDE_INVALID_ARGUMENT);
    CHECK(strstr(riptide_error_message(err), "compression") != NULL);
    CHECK(riptide_error_is_retryable(err) == 0);
    CHECK(riptide_error_os_code(err) == 0);
    /* A second failure replaces (and frees) the first error. */
    riptide_error_t *first = err;
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_wal_recovery(options, 9, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_error_free(first));
    /* Success leaves *err alone. */
    OK(riptide_options_set_compression(options, RIPTIDE_COMPRESSION_ZSTD, &err));
    CHECK(riptide_error_code(err) == RIPTIDE_INVALID_ARGUMENT);
    OK(riptide_error_free(err));
    EXPECT(RIPTIDE_MISUSE, riptide_error_free(err));
    EXPECT(RIPTIDE_MISUSE, riptide_error_free(NULL));
    CHECK(riptide_error_code(err) == RIPTIDE_MISUSE);
    CHECK(riptide_error_message(NULL) != NULL);
    CHECK(riptide_error_os_code(NULL) == 0);
    OK(riptide_options_destroy(options));
    /* Codes. */
    CHECK(riptide_code_is_retryable(RIPTIDE_CONFLICT) && riptide_code_is_retryable(RIPTIDE_DEADLOCK) &&
          riptide_code_is_retryable(RIPTIDE_LOCK_TIMEOUT));
    CHECK(!riptide_code_is_retryable(RIPTIDE_IO) && !riptide_code_is_retryable(RIPTIDE_MISUSE) &&
          !riptide_code_is_retryable(RIPTIDE_OK));
    CHECK(strcmp(riptide_code_name(RIPTIDE_PANIC), "RIPTIDE_PANIC") == 0);
    CHECK(strcmp(riptide_code_name(RIPTIDE_CANCELLED), "RIPTIDE_CANCELLED") == 0);
    CHECK(strcmp(riptide_code_name(12345), "unknown code") == 0);
    /* An I/O error carries errno: a database under a path whose parent is a file. */
    char path[300];
    snprintf(path, sizeof path, "%s/plain-file", base_dir);
    FILE *file = fopen(path, "w");
    CHECK(file != NULL);
    if (file) fclose(file);
    strcat(path, "/db");
    riptide_db_t *db = NULL;
    riptide_code_t code = riptide_open(path, NULL, &db, &err);
    CHECK(code == RIPTIDE_IO && db == NULL);
    if (code == RIPTIDE_IO) CHECK(riptide_error_os_code(err) != 0);
    OK(riptide_error_free(err));
}

static void test_options(void) {
    riptide_options_t *o = NULL;
    riptide_error_t *err = NULL;
    OK(riptide_options_create(&o, NULL));
    OK(riptide_options_set_create_if_missing(o, 1, NULL));
    OK(riptide_options_set_error_if_exists(o, 0, NULL));
    OK(riptide_options_set_comparator(o, RIPTIDE_COMPARATOR_BYTEWISE, NULL));
    OK(riptide_options_set_memtable_size_bytes(o, 1 << 20, NULL));
    OK(riptide_options_set_max_immutable_memtables(o, 3, NULL));
    OK(riptide_options_set_block_size_bytes(o, 8192, NULL));
    OK(riptide_options_set_block_restart_interval(o, 8, NULL));
    OK(riptide_options_set_bloom_bits_per_key(o, 12, NULL));
    OK(riptide_options_set_compression(o, RIPTIDE_COMPRESSION_SNAPPY, NULL));
    OK(riptide_options_set_block_cache_size_bytes(o, 8 << 20, NULL));
    OK(riptide_options_set_max_open_tables(o, 100, NULL));
    OK(riptide_options_set_wal_sync_mode(o, RIPTIDE_SYNC_INTERVAL, 1000, NULL));
    OK(riptide_options_set_wal_sync_mode(o, RIPTIDE_SYNC_FULL, 0, NULL));
    OK(riptide_options_set_wal_sync_mode(o, RIPTIDE_SYNC_NONE, 0, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_wal_sync_mode(o, 7, 0, NULL));
    OK(riptide_options_set_wal_recovery(o, RIPTIDE_WAL_RECOVERY_ABSOLUTE, NULL));
    OK(riptide_options_set_wal_recovery(o, RIPTIDE_WAL_RECOVERY_SKIP_CORRUPT, NULL));
    OK(riptide_options_set_wal_recovery(o, RIPTIDE_WAL_RECOVERY_TOLERATE_TORN_TAIL, NULL));
    OK(riptide_options_set_wal_preallocate_bytes(o, 1 << 20, NULL));
    OK(riptide_options_set_level0_compaction_trigger_files(o, 4, NULL));
    OK(riptide_options_set_level0_slowdown_writes_files(o, 10, NULL));
    OK(riptide_options_set_level0_stop_writes_files(o, 16, NULL));
    OK(riptide_options_set_target_file_size_bytes(o, 1 << 20, NULL));
    OK(riptide_options_set_level_size_ratio(o, 8, NULL));
    OK(riptide_options_set_base_level_size_bytes(o, 4 << 20, NULL));
    int32_t levels[3] = {RIPTIDE_COMPRESSION_NONE, RIPTIDE_COMPRESSION_LZ4, RIPTIDE_COMPRESSION_ZSTD};
    OK(riptide_options_set_compression_per_level(o, levels, 3, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_options_set_compression_per_level(o, NULL, 3, NULL));
    OK(riptide_options_set_bottommost_compression(o, RIPTIDE_COMPRESSION_ZSTD, NULL));
    OK(riptide_options_set_bottommost_compression(o, RIPTIDE_COMPRESSION_UNSET, NULL));
    OK(riptide_options_set_tombstone_compaction_ratio(o, 0.25, NULL));
    OK(riptide_options_set_tombstone_compaction_min_entries(o, 500, NULL));
    OK(riptide_options_set_read_compaction_bytes_per_table_seek(o, 256, NULL));
    OK(riptide_options_set_compaction_priority(o, RIPTIDE_COMPACTION_PRIORITY_ROUND_ROBIN, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_compaction_priority(o, 5, NULL));
    OK(riptide_options_set_max_background_flushes(o, 1, NULL));
    OK(riptide_options_set_max_background_compactions(o, 1, NULL));
    OK(riptide_options_set_max_subcompactions(o, 1, NULL));
    OK(riptide_options_set_max_memory_bytes(o, 128u << 20, NULL));
    OK(riptide_options_set_max_key_size_bytes(o, 1024, NULL));
    OK(riptide_options_set_max_value_size_bytes(o, 1 << 20, NULL));
    OK(riptide_options_set_max_batch_size_bytes(o, 16 << 20, NULL));
    OK(riptide_options_set_transaction_history_limit_bytes(o, 8 << 20, NULL));
    OK(riptide_options_set_min_blob_size_bytes(o, 2048, NULL));
    OK(riptide_options_set_ttl_us(o, 60ull * 1000000ull, NULL));
    OK(riptide_options_set_blob_garbage_collection_ratio(o, 0.75, NULL));
    OK(riptide_options_set_blob_garbage_collection_age_cutoff(o, 0.25, NULL));
    OK(riptide_options_set_blob_file_size_bytes(o, 1 << 20, NULL));
    OK(riptide_options_set_blob_compression(o, RIPTIDE_COMPRESSION_ZSTD, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_blob_compression(o, 99, NULL));
    OK(riptide_options_validate(o, NULL));
    char *text = NULL;
    OK(riptide_options_describe(o, &text, NULL));
    CHECK(text && strstr(text, "memtable_size_bytes: 1048576") != NULL);
    CHECK(text && strstr(text, "blob_compression: Zstd") != NULL);
    CHECK(text && strstr(text, "min_blob_size_bytes: Some(2048)") != NULL);
    CHECK(text && strstr(text, "ttl: Some(60s)") != NULL);
    CHECK(text && strstr(text, "blob_garbage_collection_ratio: 0.75") != NULL);
    CHECK(text && strstr(text, "blob_garbage_collection_age_cutoff: 0.25") != NULL);
    CHECK(text && strstr(text, "blob_file_size_bytes: 1048576") != NULL);
    riptide_free(text);
    /* 0 turns key-value separation off; the other blob fields' ranges are checked by validation. */
    OK(riptide_options_set_min_blob_size_bytes(o, 0, NULL));
    OK(riptide_options_describe(o, &text, NULL));
    CHECK(text && strstr(text, "min_blob_size_bytes: None") != NULL);
    riptide_free(text);
    OK(riptide_options_set_blob_file_size_bytes(o, 100, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_validate(o, &err));
    CHECK(strstr(riptide_error_message(err), "blob_file_size_bytes") != NULL);
    OK(riptide_error_free(err));
    err = NULL;
    OK(riptide_options_set_blob_file_size_bytes(o, 1 << 20, NULL));
    /* Validation reports a broken combination. */
    OK(riptide_options_set_level0_stop_writes_files(o, 2, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_validate(o, &err));
    CHECK(strstr(riptide_error_message(err), "level0_stop_writes_files") != NULL);
    OK(riptide_error_free(err));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_comparator(o, 3, NULL));

    riptide_cf_options_t *c = NULL;
    OK(riptide_cf_options_create(&c, NULL));
    OK(riptide_cf_options_set_comparator(c, RIPTIDE_COMPARATOR_REVERSE_BYTEWISE, NULL));
    OK(riptide_cf_options_set_memtable_size_bytes(c, 1 << 20, NULL));
    OK(riptide_cf_options_set_max_immutable_memtables(c, 2, NULL));
    OK(riptide_cf_options_set_block_size_bytes(c, 4096, NULL));
    OK(riptide_cf_options_set_block_restart_interval(c, 16, NULL));
    OK(riptide_cf_options_set_bloom_bits_per_key(c, 0, NULL));
    OK(riptide_cf_options_set_compression(c, RIPTIDE_COMPRESSION_NONE, NULL));
    OK(riptide_cf_options_set_compression_per_level(c, levels, 2, NULL));
    OK(riptide_cf_options_set_bottommost_compression(c, RIPTIDE_COMPRESSION_LZ4, NULL));
    OK(riptide_cf_options_set_level0_compaction_trigger_files(c, 4, NULL));
    OK(riptide_cf_options_set_level0_slowdown_writes_files(c, 8, NULL));
    OK(riptide_cf_options_set_level0_stop_writes_files(c, 12, NULL));
    OK(riptide_cf_options_set_target_file_size_bytes(c, 2 << 20, NULL));
    OK(riptide_cf_options_set_level_size_ratio(c, 10, NULL));
    OK(riptide_cf_options_set_base_level_size_bytes(c, 0, NULL));
    OK(riptide_cf_options_set_tombstone_compaction_ratio(c, 0.5, NULL));
    OK(riptide_cf_options_set_tombstone_compaction_min_entries(c, 100, NULL));
    OK(riptide_cf_options_set_read_compaction_bytes_per_table_seek(c, 0, NULL));
    OK(riptide_cf_options_set_compaction_priority(c, RIPTIDE_COMPACTION_PRIORITY_MIN_OVERLAPPING_RATIO, NULL));
    OK(riptide_cf_options_set_min_blob_size_bytes(c, 4096, NULL));
    OK(riptide_cf_options_set_blob_garbage_collection_ratio(c, 0.5, NULL));
    OK(riptide_cf_options_set_blob_garbage_collection_age_cutoff(c, 0.125, NULL));
    OK(riptide_cf_options_set_blob_file_size_bytes(c, 8 << 20, NULL));
    OK(riptide_cf_options_set_blob_compression(c, RIPTIDE_COMPRESSION_NONE, NULL));
    OK(riptide_cf_options_validate(c, NULL));
    OK(riptide_cf_options_describe(c, &text, NULL));
    CHECK(text && strstr(text, "riptide.reverse_bytewise") != NULL);
    CHECK(text && strstr(text, "min_blob_size_bytes: Some(4096)") != NULL);
    CHECK(text && strstr(text, "blob_garbage_collection_age_cutoff: 0.125") != NULL);
    CHECK(text && strstr(text, "blob_file_size_bytes: 8388608") != NULL);
    CHECK(text && strstr(text, "blob_compression: None") != NULL);
    riptide_free(text);
    OK(riptide_cf_options_set_blob_garbage_collection_ratio(c, 1.5, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_cf_options_validate(c, NULL));
    OK(riptide_cf_options_set_blob_garbage_collection_ratio(c, 0.5, NULL));
    OK(riptide_cf_options_set_tombstone_compaction_ratio(c, 2.0, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_cf_options_validate(c, NULL));
    OK(riptide_cf_options_destroy(c));
    riptide_cf_options_t *derived = NULL;
    OK(riptide_cf_options_create_from(o, &derived, NULL));
    OK(riptide_cf_options_describe(derived, &text, NULL));
    CHECK(text && strstr(text, "block_size_bytes: 8192") != NULL);
    riptide_free(text);
    OK(riptide_cf_options_destroy(derived));
    OK(riptide_options_destroy(o));

    riptide_readoptions_t *r = NULL;
    OK(riptide_readoptions_create(&r, NULL));
    OK(riptide_readoptions_set_fill_cache(r, 0, NULL));
    OK(riptide_readoptions_set_blob_readahead(r, 1, NULL));
    OK(riptide_readoptions_set_verify_checksums(r, 1, NULL));
    OK(riptide_readoptions_set_lower_bound(r, K("a"), NULL));
    OK(riptide_readoptions_set_upper_bound(r, K("z"), NULL));
    OK(riptide_readoptions_set_lower_bound(r, NULL, 0, NULL));
    OK(riptide_readoptions_set_snapshot(r, NULL, NULL));
    OK(riptide_readoptions_destroy(r));
    riptide_writeoptions_t *w = NULL;
    OK(riptide_writeoptions_create(&w, NULL));
    OK(riptide_writeoptions_set_sync(w, 1, NULL));
    OK(riptide_writeoptions_destroy(w));
    riptide_txn_options_t *t = NULL;
    OK(riptide_txn_options_create(&t, NULL));
    OK(riptide_txn_options_set_isolation(t, RIPTIDE_ISOLATION_SERIALIZABLE, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_txn_options_set_isolation(t, 9, NULL));
    OK(riptide_txn_options_set_mode(t, RIPTIDE_TXN_OPTIMISTIC, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_txn_options_set_mode(t, 2, NULL));
    OK(riptide_txn_options_set_lock_timeout_us(t, -1, NULL));
    OK(riptide_txn_options_set_deadlock_detection(t, 0, NULL));
    OK(riptide_txn_options_set_max_lock_count(t, 10, NULL));
    OK(riptide_txn_options_set_lock_escalation_threshold(t, 0, NULL));
    OK(riptide_txn_options_set_sync(t, 1, NULL));
    OK(riptide_txn_options_set_write_memory_limit_bytes(t, 1 << 20, NULL));
    OK(riptide_txn_options_destroy(t));
}

static void test_put_get(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_writeoptions_t *sync = NULL;
    OK(riptide_writeoptions_create(&sync, NULL));
    OK(riptide_writeoptions_set_sync(sync, 1, NULL));
    OK(riptide_put(db, NULL, K("alpha"), K("1"), NULL));
    OK(riptide_put(db, sync, K("beta"), K("2"), NULL));
    OK(riptide_put(db, NULL, K("empty"), NULL, 0, NULL));
    expect_value(db, NULL, "alpha", "1");
    expect_value(db, NULL, "beta", "2");
    expect_value(db, NULL, "missing", NULL);
    uint8_t *value = NULL;
    size_t len = 7;
    OK(riptide_get(db, NULL, K("empty"), &value, &len, NULL));
    CHECK(value != NULL && len == 0); /* present but empty: not NULL */
    riptide_free(value);
    OK(riptide_delete(db, sync, K("alpha"), NULL));
    expect_value(db, NULL, "alpha", NULL);
    /* Pinned reads. */
    riptide_pinnable_t *pin = NULL;
    OK(riptide_get_pinned(db, NULL, K("beta"), &pin, NULL));
    const uint8_t *data = riptide_pinnable_value(pin, &len);
    CHECK(data != NULL && len == 1 && data[0] == '2');
    OK(riptide_pinnable_release(pin));
    EXPECT(RIPTIDE_MISUSE, riptide_pinnable_release(pin));
    CHECK(riptide_pinnable_value(pin, &len) == NULL && len == 0);
    OK(riptide_get_pinned(db, NULL, K("alpha"), &pin, NULL));
    CHECK(pin == NULL);
    /* Limits are the engine's. */
    uint8_t *big = calloc(1, 100000);
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_put(db, NULL, big, 100000, K("v"), NULL));
    free(big);
    /* NULL key with a length is misuse; NULL with length 0 is the empty key. */
    EXPECT(RIPTIDE_MISUSE, riptide_put(db, NULL, NULL, 3, K("v"), NULL));
    OK(riptide_put(db, NULL, NULL, 0, K("empty-key"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_get(db, NULL, K("beta"), NULL, &len, NULL));
    char *dir = NULL;
    OK(riptide_path(db, &dir, NULL));
    CHECK(dir && strcmp(dir, path) == 0);
    riptide_free(dir);
    OK(riptide_writeoptions_destroy(sync));
    OK(riptide_close(db, NULL));
    /* A second open of the same directory while open is BUSY; reopening after close works. */
    db = open_db(path);
    riptide_db_t *second = NULL;
    EXPECT(RIPTIDE_BUSY, riptide_open(path, NULL, &second, NULL));
    expect_value(db, NULL, "beta", "2");
    OK(riptide_close(db, NULL));
    riptide_options_t *o = NULL;
    OK(riptide_options_create(&o, NULL));
    OK(riptide_options_set_error_if_exists(o, 1, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_open(path, o, &second, NULL));
    OK(riptide_options_destroy(o));
}

static void test_batches(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "things", NULL, &cf, NULL));
    riptide_batch_t *batch = NULL, *other = NULL;
    OK(riptide_batch_create(&batch, NULL));
    OK(riptide_batch_create(&other, NULL));
    OK(riptide_batch_put(batch, K("a"), K("1"), NULL));
    OK(riptide_batch_put(batch, K("b"), K("2"), NULL));
    OK(riptide_batch_delete(batch, K("a"), NULL));
    OK(riptide_batch_put_cf(batch, cf, K("x"), K("9"), NULL));
    OK(riptide_batch_delete_cf(other, cf, K("y"), NULL));
    OK(riptide_batch_put(other, K("c"), K("3"), NULL));
    OK(riptide_batch_append(batch, other, NULL));
    size_t count = 0, size = 0;
    OK(riptide_batch_count(batch, &count, NULL));
    CHECK(count == 6);
    OK(riptide_batch_size_bytes(batch, &size, NULL));
    CHECK(size > 0);
    OK(riptide_write(db, NULL, batch, NULL));
    expect_value(db, NULL, "a", NULL);
    expect_value(db, NULL, "b", "2");
    expect_value(db, NULL, "c", "3");
    uint8_t *value = NULL;
    size_t len = 0;
    OK(riptide_get_cf(db, NULL, cf, K("x"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == '9');
    riptide_free(value);
    /* The batch is left unchanged by the write. */
    OK(riptide_batch_count(batch, &count, NULL));
    CHECK(count == 6);
    OK(riptide_batch_clear(batch, NULL));
    OK(riptide_batch_count(batch, &count, NULL));
    CHECK(count == 0);
    /* A batch bound to one database's column family cannot be written to another. */
    char path2[300];
    new_path(path2, sizeof path2);
    riptide_db_t *db2 = open_db(path2);
    riptide_cf_t *cf2 = NULL;
    OK(riptide_create_column_family(db2, "things", NULL, &cf2, NULL));
    OK(riptide_batch_put_cf(batch, cf, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_put_cf(batch, cf2, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_write(db2, NULL, batch, NULL));
    OK(riptide_batch_clear(batch, NULL));
    OK(riptide_batch_put_cf(batch, cf2, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_append(batch, other, NULL)); /* other is bound to db */
    OK(riptide_write(db2, NULL, batch, NULL));
    OK(riptide_batch_destroy(batch));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_destroy(batch));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_put(batch, K("a"), K("1"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_write(db, NULL, batch, NULL));
    OK(riptide_batch_destroy(other));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
    OK(riptide_close(db2, NULL)); /* closes cf2 too */
    EXPECT(RIPTIDE_MISUSE, riptide_cf_destroy(cf2));
}

static void test_column_families(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_options_t *co = NULL;
    OK(riptide_cf_options_create(&co, NULL));
    OK(riptide_cf_options_set_comparator(co, RIPTIDE_COMPARATOR_REVERSE_BYTEWISE, NULL));
    riptide_cf_t *users = NULL, *orders = NULL, *found = NULL, *deflt = NULL;
    OK(riptide_create_column_family(db, "users", NULL, &users, NULL));
    OK(riptide_create_column_family(db, "orders", co, &orders, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_create_column_family(db, "users", NULL, &found, NULL));
    char **names = NULL;
    size_t count = 0;
    OK(riptide_list_column_families(db, &names, &count, NULL));
    CHECK(count == 3 && strcmp(names[0], "default") == 0 && strcmp(names[1], "users") == 0);
    riptide_free_string_list(names, count);
    OK(riptide_column_family_handle(db, "orders", &found, NULL));
    CHECK(found != NULL);
    uint32_t id_a = 0, id_b = 1;
    OK(riptide_cf_id(orders, &id_a, NULL));
    OK(riptide_cf_id(found, &id_b, NULL));
    CHECK(id_a == id_b && id_a != 0);
    OK(riptide_cf_destroy(found));
    OK(riptide_column_family_handle(db, "nope", &found, NULL));
    CHECK(found == NULL);
    OK(riptide_default_column_family(db, &deflt, NULL));
    OK(riptide_cf_id(deflt, &id_a, NULL));
    CHECK(id_a == 0);
    /* Reverse order in "orders". */
    OK(riptide_put_cf(db, NULL, orders, K("1"), K("one"), NULL));
    OK(riptide_put_cf(db, NULL, orders, K("2"), K("two"), NULL));
    riptide_iterator_t *it = NULL;
    OK(riptide_iterator_create_cf(db, NULL, orders, &it, NULL));
    OK(riptide_iterator_seek_to_first(it, NULL));
    size_t len = 0;
    const uint8_t *key = riptide_iterator_key(it, &len);
    CHECK(key && len == 1 && key[0] == '2');
    OK(riptide_iterator_destroy(it));
    OK(riptide_delete_cf(db, NULL, orders, K("2"), NULL));
    riptide_pinnable_t *pin = NULL;
    OK(riptide_get_pinned_cf(db, NULL, orders, K("2"), &pin, NULL));
    CHECK(pin == NULL);
    OK(riptide_get_pinned_cf(db, NULL, orders, K("1"), &pin, NULL));
    CHECK(pin != NULL);
    OK(riptide_pinnable_release(pin));
    /* Rename, name, options. */
    OK(riptide_rename_column_family(db, users, "people", NULL));
    char *name = NULL;
    OK(riptide_cf_name(users, &name, NULL));
    CHECK(name && strcmp(name, "people") == 0);
    riptide_free(name);
    riptide_cf_options_t *current = NULL;
    OK(riptide_get_column_family_options(db, orders, &current, NULL));
    OK(riptide_cf_options_set_memtable_size_bytes(current, 2 << 20, NULL));
    OK(riptide_set_column_family_options(db, orders, current, NULL));
    OK(riptide_cf_options_set_comparator(current, RIPTIDE_COMPARATOR_BYTEWISE, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_set_column_family_options(db, orders, current, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_set_column_family_options(db, orders, NULL, NULL));
    OK(riptide_cf_options_destroy(current));
    /* Drop: the handle stays, operations through it fail with INVALID_ARGUMENT. */
    uint8_t dropped = 9;
    OK(riptide_cf_is_dropped(users, &dropped, NULL));
    CHECK(dropped == 0);
    OK(riptide_drop_column_family(db, users, NULL));
    OK(riptide_cf_is_dropped(users, &dropped, NULL));
    CHECK(dropped == 1);
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_put_cf(db, NULL, users, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_drop_column_family(db, deflt, NULL));
    OK(riptide_cf_destroy(users));
    OK(riptide_close(db, NULL));
    /* Closing destroyed the remaining column family handles. */
    EXPECT(RIPTIDE_MISUSE, riptide_cf_destroy(orders));
    EXPECT(RIPTIDE_MISUSE, riptide_cf_destroy(deflt));
    /* Reopen with options per column family. */
    riptide_options_t *o = NULL;
    OK(riptide_options_create(&o, NULL));
    const char *cf_names[2] = {"orders", "fresh"};
    riptide_cf_options_t *plain = NULL;
    OK(riptide_cf_options_create(&plain, NULL));
    const riptide_cf_options_t *cf_opts[2] = {co, plain};
    OK(riptide_open_with_column_families(path, o, 2, cf_names, cf_opts, &db, NULL));
    OK(riptide_column_family_handle(db, "orders", &orders, NULL));
    uint8_t *value = NULL;
    OK(riptide_get_cf(db, NULL, orders, K("1"), &value, &len, NULL));
    CHECK(value && len == 3 && memcmp(value, "one", 3) == 0);
    riptide_free(value);
    OK(riptide_column_family_handle(db, "fresh", &found, NULL));
    CHECK(found != NULL);
    OK(riptide_close(db, NULL));
    /* The comparator of an existing column family cannot change. */
    const riptide_cf_options_t *wrong[1] = {plain};
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_open_with_column_families(path, o, 1, cf_names, wrong, &db, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_open_with_column_families(path, o, 1, NULL, wrong, &db, NULL));
    OK(riptide_cf_options_destroy(plain));
    OK(riptide_cf_options_destroy(co));
    OK(riptide_options_destroy(o));
}

/* Collects the keys an iterator yields moving forward (or backward) into buf, "a,b,c". */
static void walk(riptide_iterator_t *it, int forward, char *buf, size_t size) {
    buf[0] = 0;
    while (riptide_iterator_valid(it)) {
        const uint8_t *key, *value;
        size_t klen, vlen;
        CHECK(riptide_iterator_current(it, &key, &klen, &value, &vlen) == 1);
        if (buf[0]) strncat(buf, ",", size - strlen(buf) - 1);
        strncat(buf, (const char *)key, klen < size - strlen(buf) - 1 ? klen : size - strlen(buf) - 1);
        OK(forward ? riptide_iterator_next(it, NULL) : riptide_iterator_prev(it, NULL));
    }
    OK(riptide_iterator_status(it, NULL));
}

/* As walk, stepping with riptide_iterator_next_entry / prev_entry, whose out-parameters must
 * agree with riptide_iterator_current after every step. */
static void walk_entries(riptide_iterator_t *it, int forward, char *buf, size_t size) {
    buf[0] = 0;
    const uint8_t *key = NULL, *value = NULL;
    size_t klen = 0, vlen = 0;
    riptide_iterator_current(it, &key, &klen, &value, &vlen);
    while (key != NULL) {
        if (buf[0]) strncat(buf, ",", size - strlen(buf) - 1);
        strncat(buf, (const char *)key, klen < size - strlen(buf) - 1 ? klen : size - strlen(buf) - 1);
        OK(forward ? riptide_iterator_next_entry(it, &key, &klen, &value, &vlen, NULL)
                   : riptide_iterator_prev_entry(it, &key, &klen, &value, &vlen, NULL));
        const uint8_t *ckey = NULL, *cvalue = NULL;
        size_t cklen = 7, cvlen = 7;
        const uint8_t on_key = riptide_iterator_current(it, &ckey, &cklen, &cvalue, &cvlen);
        CHECK(on_key == (key != NULL));
        CHECK(ckey == key && cklen == klen && cvalue == value && cvlen == vlen);
        if (key == NULL) CHECK(klen == 0 && value == NULL && vlen == 0);
    }
    OK(riptide_iterator_status(it, NULL));
}

/* Reads one batch (riptide_iterator_next_batch) and appends its keys to `keys` as "k=v,";
 * returns how many entries it copied. Every entry's value must equal its key. */
static size_t read_batch(riptide_iterator_t *it, int step_first, const char *stop, size_t max_entries,
                         size_t buffer_len, char *keys, size_t size) {
    uint8_t buffer[256];
    size_t entries = 99, used = 99;
    CHECK(buffer_len <= sizeof buffer);
    OK(riptide_iterator_next_batch(it, step_first, (const uint8_t *)stop, stop ? strlen(stop) : 0, max_entries,
                                   buffer, buffer_len, &entries, &used, NULL));
    CHECK(used <= buffer_len);
    size_t offset = 0;
    for (size_t i = 0; i < entries; i++) {
        CHECK(offset + 8 <= used);
        const uint32_t klen = buffer[offset] | buffer[offset + 1] << 8 | buffer[offset + 2] << 16 | (uint32_t)buffer[offset + 3] << 24;
        const uint32_t vlen = buffer[offset + 4] | buffer[offset + 5] << 8 | buffer[offset + 6] << 16 | (uint32_t)buffer[offset + 7] << 24;
        offset += 8;
        CHECK(offset + klen + vlen <= used);
        CHECK(klen == vlen && memcmp(buffer + offset, buffer + offset + klen, klen) == 0);
        strncat(keys, (const char *)buffer + offset, klen < size - strlen(keys) - 1 ? klen : size - strlen(keys) - 1);
        strncat(keys, ",", size - strlen(keys) - 1);
        offset += klen + vlen;
    }
    CHECK(offset == used);
    return entries;
}

static void test_iterator_batches(void) {
    char path[300], keys[256];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    const char *all[] = {"b", "c", "d", "e", "f"};
    for (int i = 0; i < 5; i++) OK(riptide_put(db, NULL, K(all[i]), K(all[i]), NULL));
    riptide_iterator_t *it = NULL;
    OK(riptide_iterator_create(db, NULL, &it, NULL));
    /* From the current entry, two at a time; each call goes on from the first entry not copied. */
    OK(riptide_iterator_seek_to_first(it, NULL));
    keys[0] = 0;
    CHECK(read_batch(it, 0, NULL, 2, 256, keys, sizeof keys) == 2);
    CHECK(riptide_iterator_valid(it) && riptide_iterator_key(it, NULL)[0] == 'd');
    CHECK(read_batch(it, 0, NULL, 2, 256, keys, sizeof keys) == 2);
    CHECK(read_batch(it, 0, NULL, 2, 256, keys, sizeof keys) == 1);
    CHECK(riptide_iterator_valid(it) == 0);
    CHECK(read_batch(it, 0, NULL, 2, 256, keys, sizeof keys) == 0);
    CHECK(strcmp(keys, "b,c,d,e,f,") == 0);
    /* step_first moves past the entry the caller read; the stop key is exclusive and the
     * entry it stops at stays current. */
    OK(riptide_iterator_seek(it, K("b"), NULL));
    keys[0] = 0;
    CHECK(read_batch(it, 1, "e", 10, 256, keys, sizeof keys) == 2);
    CHECK(strcmp(keys, "c,d,") == 0);
    CHECK(riptide_iterator_valid(it) && riptide_iterator_key(it, NULL)[0] == 'e');
    CHECK(read_batch(it, 0, "e", 10, 256, keys, sizeof keys) == 0);
    CHECK(riptide_iterator_valid(it) && riptide_iterator_key(it, NULL)[0] == 'e');
    /* A buffer too small for the next entry (8 bytes of lengths and 2 of data): none copied,
     * the entry stays current; the bytes of whole entries only. */
    keys[0] = 0;
    CHECK(read_batch(it, 0, NULL, 10, 9, keys, sizeof keys) == 0);
    CHECK(riptide_iterator_valid(it) && riptide_iterator_key(it, NULL)[0] == 'e');
    CHECK(read_batch(it, 0, NULL, 10, 25, keys, sizeof keys) == 2);
    CHECK(strcmp(keys, "e,f,") == 0);
    /* Misuse: NULL out-parameters, a NULL buffer with a length, a stale handle. */
    uint8_t buffer[16];
    size_t entries = 7, used = 7;
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_next_batch(it, 0, NULL, 0, 1, buffer, sizeof buffer, NULL, &used, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_next_batch(it, 0, NULL, 0, 1, NULL, 16, &entries, &used, NULL));
    CHECK(entries == 0 && used == 0);
    OK(riptide_iterator_destroy(it));
    entries = used = 7;
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_next_batch(it, 1, NULL, 0, 1, buffer, sizeof buffer, &entries, &used, NULL));
    CHECK(entries == 0 && used == 0);
    OK(riptide_close(db, NULL));
}

static void test_iterators_and_snapshots(void) {
    char path[300], keys[256];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    const char *all[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++) OK(riptide_put(db, NULL, K(all[i]), K(all[i]), NULL));
    riptide_snapshot_t *snap = NULL;
    OK(riptide_snapshot_create(db, &snap, NULL));
    uint64_t seq = 0;
    OK(riptide_snapshot_sequence(snap, &seq, NULL));
    CHECK(seq > 0);
    OK(riptide_put(db, NULL, K("f"), K("f"), NULL));
    OK(riptide_delete(db, NULL, K("a"), NULL));

    riptide_iterator_t *it = NULL;
    OK(riptide_iterator_create(db, NULL, &it, NULL));
    CHECK(riptide_iterator_valid(it) == 0); /* unpositioned */
    OK(riptide_iterator_seek_to_first(it, NULL));
    walk(it, 1, keys, sizeof keys);
    CHECK(strcmp(keys, "b,c,d,e,f") == 0);
    OK(riptide_iterator_seek_to_last(it, NULL));
    walk(it, 0, keys, sizeof keys);
    CHECK(strcmp(keys, "f,e,d,c,b") == 0);
    OK(riptide_iterator_seek_to_first(it, NULL));
    walk_entries(it, 1, keys, sizeof keys);
    CHECK(strcmp(keys, "b,c,d,e,f") == 0);
    OK(riptide_iterator_seek(it, K("d"), NULL));
    walk_entries(it, 0, keys, sizeof keys);
    CHECK(strcmp(keys, "d,c,b") == 0);
    OK(riptide_iterator_seek(it, K("cc"), NULL));
    size_t len = 0;
    const uint8_t *key = riptide_iterator_key(it, &len);
    CHECK(key && len == 1 && key[0] == 'd');
    const uint8_t *value = riptide_iterator_value(it, &len);
    CHECK(value && len == 1 && value[0] == 'd');
    OK(riptide_iterator_seek_for_prev(it, K("cc"), NULL));
    key = riptide_iterator_key(it, &len);
    CHECK(key && len == 1 && key[0] == 'c');
    OK(riptide_iterator_seek(it, K("zz"), NULL));
    CHECK(riptide_iterator_valid(it) == 0);
    CHECK(riptide_iterator_key(it, &len) == NULL && len == 0);
    CHECK(riptide_iterator_current(it, NULL, NULL, NULL, NULL) == 0);
    OK(riptide_iterator_destroy(it));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_destroy(it));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_next(it, NULL));
    CHECK(riptide_iterator_valid(it) == 0);
    /* A stale handle: MISUSE, and the out-parameters say "no entry". */
    key = (const uint8_t *)"x";
    len = 5;
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_next_entry(it, &key, &len, NULL, NULL, NULL));
    CHECK(key == NULL && len == 0);
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_prev_entry(NULL, NULL, NULL, NULL, NULL, NULL));

    /* Bounds and a snapshot. */
    riptide_readoptions_t *ro = NULL;
    OK(riptide_readoptions_create(&ro, NULL));
    OK(riptide_readoptions_set_snapshot(ro, snap, NULL));
    OK(riptide_readoptions_set_lower_bound(ro, K("b"), NULL));
    OK(riptide_readoptions_set_upper_bound(ro, K("e"), NULL));
    OK(riptide_iterator_create(db, ro, &it, NULL));
    OK(riptide_iterator_seek_to_first(it, NULL));
    walk(it, 1, keys, sizeof keys);
    CHECK(strcmp(keys, "b,c,d") == 0);
    OK(riptide_iterator_seek_to_last(it, NULL));
    walk(it, 0, keys, sizeof keys);
    CHECK(strcmp(keys, "d,c,b") == 0);
    expect_value(db, ro, "a", "a"); /* deleted after the snapshot */
    expect_value(db, ro, "f", NULL); /* written after the snapshot */
    /* Releasing the snapshot handle leaves the read options' and iterator's references. */
    OK(riptide_snapshot_release(snap));
    EXPECT(RIPTIDE_MISUSE, riptide_snapshot_release(snap));
    EXPECT(RIPTIDE_MISUSE, riptide_snapshot_sequence(snap, &seq, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_readoptions_set_snapshot(ro, snap, NULL));
    expect_value(db, ro, "a", "a");
    OK(riptide_iterator_seek(it, K("c"), NULL));
    CHECK(riptide_iterator_valid(it) == 1);
    /* Closing the database destroys the iterator. */
    OK(riptide_close(db, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_seek_to_first(it, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_status(it, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_destroy(it));
    OK(riptide_readoptions_destroy(ro));
}

static void test_shared_locks(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "rows", NULL, &cf, NULL));
    OK(riptide_put(db, NULL, K("row"), K("v"), NULL));
    OK(riptide_put_cf(db, NULL, cf, K("row"), K("w"), NULL));
    riptide_txn_options_t *to = NULL;
    OK(riptide_txn_options_create(&to, NULL));
    OK(riptide_txn_options_set_lock_timeout_us(to, 0, NULL));
    riptide_txn_t *a = NULL, *b = NULL;
    OK(riptide_txn_begin(db, to, &a, NULL));
    OK(riptide_txn_begin(db, to, &b, NULL));
    uint8_t *value = NULL;
    size_t len = 0;
    /* Two transactions share-lock the same rows and both read them. */
    OK(riptide_txn_get_for_share(a, K("row"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == 'v');
    riptide_free(value);
    OK(riptide_txn_get_for_share(b, K("row"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == 'v');
    riptide_free(value);
    OK(riptide_txn_get_for_share_cf(a, cf, K("row"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == 'w');
    riptide_free(value);
    OK(riptide_txn_get_for_share_cf(b, cf, K("absent"), &value, &len, NULL));
    CHECK(value == NULL);
    /* Neither can write a row the other shares, nor lock it for update. */
    EXPECT(RIPTIDE_LOCK_TIMEOUT, riptide_txn_put(b, K("row"), K("x"), NULL));
    EXPECT(RIPTIDE_LOCK_TIMEOUT, riptide_txn_get_for_update_cf(b, cf, K("row"), &value, &len, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_get_for_share(a, NULL, 1, &value, &len, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_get_for_share(a, K("row"), NULL, &len, NULL));
    /* Once the other sharer ends, the row can be written. */
    OK(riptide_txn_commit(b, NULL));
    OK(riptide_txn_destroy(b));
    OK(riptide_txn_put(a, K("row"), K("x"), NULL));
    OK(riptide_txn_commit(a, NULL));
    OK(riptide_txn_destroy(a));
    expect_value(db, NULL, "row", "x");
    OK(riptide_txn_options_destroy(to));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
}

static void test_transactions(void) {
    char path[300], keys[256];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "rows", NULL, &cf, NULL));
    OK(riptide_put(db, NULL, K("stock"), K("10"), NULL));
    riptide_txn_options_t *to = NULL;
    OK(riptide_txn_options_create(&to, NULL));
    OK(riptide_txn_options_set_isolation(to, RIPTIDE_ISOLATION_SERIALIZABLE, NULL));
    OK(riptide_txn_options_set_lock_timeout_us(to, 0, NULL));

    riptide_txn_t *t = NULL;
    OK(riptide_txn_begin(db, to, &t, NULL));
    uint8_t *value = NULL;
    size_t len = 0;
    OK(riptide_txn_get_for_update(t, K("stock"), &value, &len, NULL));
    CHECK(value && len == 2 && memcmp(value, "10", 2) == 0);
    riptide_free(value);
    OK(riptide_txn_put(t, K("stock"), K("9"), NULL));
    OK(riptide_txn_put_cf(t, cf, K("r1"), K("row"), NULL));
    OK(riptide_txn_get(t, K("stock"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == '9');
    riptide_free(value);
    OK(riptide_txn_get_cf(t, cf, K("r1"), &value, &len, NULL));
    CHECK(value && len == 3);
    riptide_free(value);
    OK(riptide_txn_get_for_update_cf(t, cf, K("r2"), &value, &len, NULL));
    CHECK(value == NULL);
    riptide_pinnable_t *pin = NULL;
    OK(riptide_txn_get_pinned(t, NULL, K("stock"), &pin, NULL));
    CHECK(pin && riptide_pinnable_value(pin, &len) && len == 1);
    OK(riptide_pinnable_release(pin));
    OK(riptide_txn_get_pinned(t, cf, K("r1"), &pin, NULL));
    CHECK(pin != NULL);
    OK(riptide_pinnable_release(pin));
    /* Outside the transaction nothing is visible yet; the lock blocks a second writer. */
    expect_value(db, NULL, "stock", "10");
    riptide_txn_t *t2 = NULL;
    riptide_error_t *err = NULL;
    OK(riptide_txn_begin(db, to, &t2, NULL));
    EXPECT(RIPTIDE_LOCK_TIMEOUT, riptide_txn_put(t2, K("stock"), K("1"), &err));
    CHECK(riptide_error_is_retryable(err) == 1);
    OK(riptide_error_free(err));
    OK(riptide_txn_rollback(t2, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_put(t2, K("x"), K("1"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_commit(t2, NULL));
    OK(riptide_txn_destroy(t2));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_destroy(t2));
    /* Savepoints. */
    OK(riptide_txn_savepoint(t, NULL));
    OK(riptide_txn_put(t, K("temp"), K("t"), NULL));
    OK(riptide_txn_delete(t, K("stock"), NULL));
    OK(riptide_txn_rollback_to_savepoint(t, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_txn_rollback_to_savepoint(t, NULL));
    OK(riptide_txn_savepoint(t, NULL));
    OK(riptide_txn_delete_cf(t, cf, K("r1"), NULL));
    OK(riptide_txn_put_cf(t, cf, K("r3"), K("row3"), NULL));
    OK(riptide_txn_release_savepoint(t, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_txn_release_savepoint(t, NULL));
    /* An iterator merges the transaction's writes with the database. */
    riptide_iterator_t *it = NULL;
    OK(riptide_txn_iterator_create(t, NULL, NULL, &it, NULL));
    OK(riptide_iterator_seek_to_first(it, NULL));
    walk(it, 1, keys, sizeof keys);
    CHECK(strcmp(keys, "stock") == 0);
    riptide_iterator_t *cf_it = NULL;
    OK(riptide_txn_iterator_create(t, NULL, cf, &cf_it, NULL));
    OK(riptide_iterator_seek_to_last(cf_it, NULL));
    walk(cf_it, 0, keys, sizeof keys);
    CHECK(strcmp(keys, "r3") == 0);
    OK(riptide_iterator_destroy(cf_it));
    uint64_t id = 0, writes = 0, memory = 0, spilled = 9;
    OK(riptide_txn_info(t, &id, &writes, &memory, &spilled, NULL));
    CHECK(id > 0 && writes >= 3 && memory > 0 && spilled == 0);
    OK(riptide_txn_info(t, NULL, NULL, NULL, NULL, NULL));
    riptide_snapshot_t *snap = NULL;
    OK(riptide_txn_snapshot(t, &snap, NULL));
    CHECK(snap != NULL);
    OK(riptide_snapshot_release(snap));
    /* Commit destroys the live iterator. */
    OK(riptide_txn_commit(t, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_next(it, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_commit(t, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_get(t, K("stock"), &value, &len, NULL));
    OK(riptide_txn_destroy(t));
    expect_value(db, NULL, "stock", "9");
    expect_value(db, NULL, "temp", NULL);

    /* Optimistic conflict: first committer wins, the second gets a retryable CONFLICT. */
    OK(riptide_txn_options_set_mode(to, RIPTIDE_TXN_OPTIMISTIC, NULL));
    OK(riptide_txn_options_set_isolation(to, RIPTIDE_ISOLATION_REPEATABLE_READ, NULL));
    OK(riptide_txn_begin(db, to, &t, NULL));
    OK(riptide_txn_begin(db, to, &t2, NULL));
    OK(riptide_txn_put(t, K("hot"), K("1"), NULL));
    OK(riptide_txn_put(t2, K("hot"), K("2"), NULL));
    OK(riptide_txn_commit(t, NULL));
    EXPECT(RIPTIDE_CONFLICT, riptide_txn_commit(t2, &err));
    CHECK(riptide_error_is_retryable(err));
    OK(riptide_error_free(err));
    OK(riptide_txn_destroy(t));
    OK(riptide_txn_destroy(t2));
    /* READ COMMITTED has no snapshot. */
    OK(riptide_txn_options_set_isolation(to, RIPTIDE_ISOLATION_READ_COMMITTED, NULL));
    OK(riptide_txn_begin(db, to, &t, NULL));
    OK(riptide_txn_snapshot(t, &snap, NULL));
    CHECK(snap == NULL);
    /* Destroying an active transaction rolls it back. */
    OK(riptide_txn_put(t, K("never"), K("x"), NULL));
    OK(riptide_txn_destroy(t));
    expect_value(db, NULL, "never", NULL);
    /* A transaction used with another database's column family. */
    char path2[300];
    new_path(path2, sizeof path2);
    riptide_db_t *db2 = open_db(path2);
    OK(riptide_txn_begin(db2, NULL, &t, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_put_cf(t, cf, K("k"), K("v"), NULL));
    /* Closing the database ends and destroys its transactions. */
    OK(riptide_close(db2, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_put(t, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_destroy(t));
    OK(riptide_txn_options_destroy(to));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
}

static void test_two_phase_commit(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_txn_t *t = NULL;
    OK(riptide_txn_begin(db, NULL, &t, NULL));
    OK(riptide_txn_put(t, K("2pc-a"), K("A"), NULL));
    OK(riptide_txn_prepare(t, K("xid-1"), NULL));
    /* Prepared: only commit or rollback remain. */
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_txn_put(t, K("2pc-x"), K("X"), NULL));
    OK(riptide_txn_destroy(t)); /* stays prepared */
    OK(riptide_txn_begin(db, NULL, &t, NULL));
    OK(riptide_txn_put(t, K("2pc-b"), K("B"), NULL));
    OK(riptide_txn_prepare(t, K("xid-2"), NULL));
    OK(riptide_txn_destroy(t));
    OK(riptide_close(db, NULL));
    /* After a restart the prepared transactions are listed and decided by xid. */
    db = open_db(path);
    uint8_t **xids = NULL;
    size_t *lengths = NULL, count = 0;
    OK(riptide_prepared_transactions(db, &xids, &lengths, &count, NULL));
    CHECK(count == 2);
    if (count == 2) CHECK(lengths[0] == 5 && memcmp(xids[0], "xid-1", 5) == 0 && memcmp(xids[1], "xid-2", 5) == 0);
    riptide_free_bytes_list(xids, lengths, count);
    expect_value(db, NULL, "2pc-a", NULL);
    OK(riptide_commit_prepared(db, K("xid-1"), NULL));
    OK(riptide_rollback_prepared(db, K("xid-2"), NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_commit_prepared(db, K("xid-2"), NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_rollback_prepared(db, K("unknown"), NULL));
    expect_value(db, NULL, "2pc-a", "A");
    expect_value(db, NULL, "2pc-b", NULL);
    /* Prepare then commit through the handle. */
    OK(riptide_txn_begin(db, NULL, &t, NULL));
    OK(riptide_txn_put(t, K("2pc-c"), K("C"), NULL));
    OK(riptide_txn_prepare(t, K("xid-3"), NULL));
    OK(riptide_txn_commit(t, NULL));
    OK(riptide_txn_destroy(t));
    expect_value(db, NULL, "2pc-c", "C");
    OK(riptide_prepared_transactions(db, &xids, &lengths, &count, NULL));
    CHECK(count == 0);
    riptide_free_bytes_list(xids, lengths, count);
    OK(riptide_close(db, NULL));
}

static void test_stats_and_maintenance(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "data", NULL, &cf, NULL));
    char key[32], value[200];
    memset(value, 'v', sizeof value);
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "key%06d", i);
        OK(riptide_put(db, NULL, (const uint8_t *)key, strlen(key), (const uint8_t *)value, sizeof value, NULL));
        OK(riptide_put_cf(db, NULL, cf, (const uint8_t *)key, strlen(key), (const uint8_t *)value, 20, NULL));
    }
    OK(riptide_flush(db, NULL));
    OK(riptide_wait_for_background_work(db, NULL));
    OK(riptide_compact_range(db, cf, K("key000100"), K("key002000"), NULL));
    OK(riptide_compact_range(db, NULL, NULL, 0, NULL, 0, NULL));
    OK(riptide_compact_all(db, NULL));
    OK(riptide_cancel_manual_compactions(db, NULL));
    OK(riptide_set_block_cache_capacity(db, 4 << 20, NULL));

    riptide_stats_t stats;
    memset(&stats, 0xff, sizeof stats);
    stats.struct_size = sizeof stats;
    OK(riptide_get_stats(db, &stats, NULL));
    CHECK(stats.struct_size == sizeof stats);
    CHECK(stats.flush_count > 0 && stats.user_bytes_written > 600000 && stats.num_column_families == 2);
    CHECK(stats.num_levels > 0 && stats.total_table_bytes > 0 && stats.memory_limit_bytes == (64u << 20));
    CHECK(stats.memory_pressure <= RIPTIDE_MEMORY_PRESSURE_CRITICAL && stats.has_background_error == 0);
    CHECK(stats.write_amplification > 0.0);
    /* An older, shorter struct gets only its prefix. */
    uint64_t small[3] = {sizeof small, 77, 77};
    OK(riptide_get_stats(db, (riptide_stats_t *)small, NULL));
    CHECK(small[0] == sizeof small && small[2] != 77);
    uint64_t unset = 0;
    EXPECT(RIPTIDE_MISUSE, riptide_get_stats(db, (riptide_stats_t *)&unset, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_get_stats(db, NULL, NULL));

    riptide_cf_stats_t cf_stats = {.struct_size = sizeof cf_stats};
    OK(riptide_get_cf_stats(db, cf, &cf_stats, NULL));
    CHECK(cf_stats.id > 0 && cf_stats.num_levels > 0);
    riptide_level_stats_t levels[16];
    size_t count = 0;
    OK(riptide_get_level_stats(db, NULL, levels, 16, sizeof levels[0], &count, NULL));
    CHECK(count > 0);
    uint64_t files = 0;
    for (size_t i = 0; i < count && i < 16; i++) files += levels[i].files;
    CHECK(files > 0);
    OK(riptide_get_level_stats(db, cf, NULL, 0, 0, &count, NULL));
    CHECK(count > 0);
    EXPECT(RIPTIDE_MISUSE, riptide_get_level_stats(db, cf, NULL, 4, sizeof levels[0], &count, NULL));
    char *text = NULL;
    OK(riptide_stats_text(db, &text, NULL));
    CHECK(text && strstr(text, "column family") != NULL);
    riptide_free(text);

    riptide_range_stats_t range = {.struct_size = sizeof range};
    OK(riptide_approximate_range_stats(db, NULL, K("key000000"), K("key001500"), &range, NULL));
    CHECK(range.table_bytes > 0 && range.entries == range.table_entries + range.memtable_entries);
    CHECK(range.entries > 500 && range.entries < 3000);
    OK(riptide_approximate_range_stats(db, cf, K("key"), K("kez"), &range, NULL));
    CHECK(range.entries > 0);
    uint64_t bytes = 0;
    OK(riptide_approximate_size(db, K("key000000"), K("key999999"), &bytes, NULL));
    CHECK(bytes > 0);
    /* A checkpoint opens with the same contents; its directory must be new. */
    char checkpoint_path[300];
    new_path(checkpoint_path, sizeof checkpoint_path);
    OK(riptide_put(db, NULL, K("only-in-the-log"), K("yes"), NULL));
    OK(riptide_checkpoint(db, checkpoint_path, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_checkpoint(db, checkpoint_path, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_checkpoint(db, NULL, NULL));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
    riptide_db_t *copy = open_db(checkpoint_path);
    riptide_readoptions_t *copy_ro = NULL;
    OK(riptide_readoptions_create(&copy_ro, NULL));
    expect_value(copy, copy_ro, "only-in-the-log", "yes");
    OK(riptide_readoptions_destroy(copy_ro));
    OK(riptide_close(copy, NULL));
}

/* The number of files in dir whose names end in suffix (-1 when dir cannot be read). */
static int count_files(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        size_t len = strlen(entry->d_name), suffix_len = strlen(suffix);
        if (entry->d_name[0] != '.' && len >= suffix_len && strcmp(entry->d_name + len - suffix_len, suffix) == 0)
            count++;
    }
    closedir(d);
    return count;
}

/* Values at or above min_blob_size_bytes go to blob files at flush, smaller ones stay in the
 * tables; all read back, before and after a reopen; a column family's own option applies to it. */
static void test_blob_files(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_options_t *options = NULL;
    OK(riptide_options_create(&options, NULL));
    OK(riptide_options_set_min_blob_size_bytes(options, 100, NULL));
    riptide_db_t *db = NULL;
    OK(riptide_open(path, options, &db, NULL));
    char below[99], at[100], above[4000];
    memset(below, 'b', sizeof below);
    memset(at, 'a', sizeof at);
    memset(above, 'x', sizeof above);
    OK(riptide_put(db, NULL, K("below"), (const uint8_t *)below, sizeof below, NULL));
    OK(riptide_flush(db, NULL));
    CHECK(count_files(path, ".blob") == 0);
    OK(riptide_put(db, NULL, K("at"), (const uint8_t *)at, sizeof at, NULL));
    OK(riptide_flush(db, NULL));
    CHECK(count_files(path, ".blob") == 1);
    OK(riptide_put(db, NULL, K("above"), (const uint8_t *)above, sizeof above, NULL));
    OK(riptide_flush(db, NULL));
    CHECK(count_files(path, ".blob") == 2);
    for (int round = 0; round < 2; round++) {
        const char *keys[3] = {"below", "at", "above"};
        const char *values[3] = {below, at, above};
        size_t lengths[3] = {sizeof below, sizeof at, sizeof above};
        for (int i = 0; i < 3; i++) {
            uint8_t *value = NULL;
            size_t len = 0;
            OK(riptide_get(db, NULL, K(keys[i]), &value, &len, NULL));
            CHECK(value != NULL && len == lengths[i] && memcmp(value, values[i], len) == 0);
            riptide_free(value);
        }
        OK(riptide_close(db, NULL));
        db = NULL;
        if (round == 0) OK(riptide_open(path, options, &db, NULL));
    }
    OK(riptide_options_destroy(options));

    /* A column family separates its values by its own option; the default one keeps them. */
    new_path(path, sizeof path);
    db = open_db(path);
    riptide_cf_options_t *cf_options = NULL;
    OK(riptide_cf_options_create(&cf_options, NULL));
    OK(riptide_cf_options_set_min_blob_size_bytes(cf_options, 1000, NULL));
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "blobs", cf_options, &cf, NULL));
    OK(riptide_put(db, NULL, K("k"), (const uint8_t *)above, sizeof above, NULL));
    OK(riptide_flush(db, NULL));
    CHECK(count_files(path, ".blob") == 0);
    OK(riptide_put_cf(db, NULL, cf, K("k"), (const uint8_t *)above, sizeof above, NULL));
    OK(riptide_flush(db, NULL));
    CHECK(count_files(path, ".blob") == 1);
    uint8_t *value = NULL;
    size_t len = 0;
    OK(riptide_get_cf(db, NULL, cf, K("k"), &value, &len, NULL));
    CHECK(value != NULL && len == sizeof above && memcmp(value, above, len) == 0);
    riptide_free(value);
    OK(riptide_cf_destroy(cf));
    OK(riptide_cf_options_destroy(cf_options));
    OK(riptide_close(db, NULL));
}

/* Flips one bit of the middle byte of the first file readdir lists in dir (named in victim); 0 on success. */
static int corrupt_first_file(const char *dir, char *victim, size_t size) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *entry;
    int status = -1;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        snprintf(victim, size, "%s/%s", dir, entry->d_name);
        FILE *file = fopen(victim, "r+b");
        if (!file) break;
        if (fseek(file, 0, SEEK_END) == 0) {
            long middle = ftell(file) / 2;
            int byte = fseek(file, middle, SEEK_SET) == 0 ? fgetc(file) : EOF;
            if (byte != EOF && fseek(file, middle, SEEK_SET) == 0 && fputc(byte ^ 0x40, file) != EOF) status = 0;
        }
        if (fclose(file) != 0) status = -1;
        break;
    }
    closedir(d);
    return status;
}

/* Backups: create (two, the second incremental), list, verify, restore into a fresh directory
 * and read every key back, damage found by verify and restore, delete, and bad arguments. */
static void test_backups(void) {
    char path[300], backups[300], restored[300], damaged[300], victim[600], key[32], value[64];
    new_path(path, sizeof path);
    new_path(backups, sizeof backups);
    new_path(restored, sizeof restored);
    new_path(damaged, sizeof damaged);
    riptide_db_t *db = open_db(path);
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof key, "key%05d", i);
        snprintf(value, sizeof value, "value-%d", i);
        OK(riptide_put(db, NULL, (const uint8_t *)key, strlen(key), (const uint8_t *)value, strlen(value), NULL));
        if (i == 1500) OK(riptide_flush(db, NULL)); /* the rest only in the log */
    }
    riptide_backup_engine_t *engine = NULL;
    riptide_error_t *err = NULL;
    uint64_t first = 0, second = 0;
    OK(riptide_backup_engine_open(backups, &engine, NULL));
    OK(riptide_backup_engine_create_backup(engine, db, &first, NULL));
    OK(riptide_put(db, NULL, K("after-the-first"), K("yes"), NULL));
    OK(riptide_backup_engine_create_backup(engine, db, &second, NULL));
    CHECK(first == 1 && second == 2);
    OK(riptide_close(db, NULL));

    /* List: the count alone, a short array, a full one, an older (shorter) element. */
    size_t count = 99;
    OK(riptide_backup_engine_list_backups(engine, NULL, 0, sizeof(riptide_backup_info_t), &count, NULL));
    CHECK(count == 2);
    riptide_backup_info_t infos[3];
    memset(infos, 0xee, sizeof infos);
    OK(riptide_backup_engine_list_backups(engine, infos, 1, sizeof infos[0], &count, NULL));
    CHECK(count == 2 && infos[0].id == 1 && infos[1].id == 0xeeeeeeeeeeeeeeeeull);
    OK(riptide_backup_engine_list_backups(engine, infos, 3, sizeof infos[0], &count, NULL));
    CHECK(count == 2 && infos[0].id == 1 && infos[1].id == 2);
    CHECK(infos[2].id == 0xeeeeeeeeeeeeeeeeull);
    for (int i = 0; i < 2; i++)
        CHECK(infos[i].file_count >= 3 && infos[i].size_bytes > 0 && infos[i].timestamp_secs > 1700000000u);
    uint64_t older[2][2];
    memset(older, 0xee, sizeof older);
    OK(riptide_backup_engine_list_backups(engine, (riptide_backup_info_t *)older, 2, sizeof older[0], &count, NULL));
    CHECK(older[0][0] == 1 && older[1][0] == 2 && older[1][1] == infos[1].timestamp_secs);

    /* Verify, restore, open the copy and read every key: exactly what the first backup held. */
    OK(riptide_backup_engine_verify_backup(engine, first, NULL));
    OK(riptide_backup_engine_verify_backup(engine, second, NULL));
    OK(riptide_backup_engine_restore(engine, first, restored, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_backup_engine_restore(engine, first, restored, &err));
    CHECK(strstr(riptide_error_message(err), "exists") != NULL);
    riptide_db_t *copy = open_db(restored);
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof key, "key%05d", i);
        snprintf(value, sizeof value, "value-%d", i);
        expect_value(copy, NULL, key, value);
    }
    expect_value(copy, NULL, "after-the-first", NULL);
    OK(riptide_close(copy, NULL));

    /* Unknown ids are typed errors and change nothing. */
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_backup_engine_verify_backup(engine, 42, &err));
    CHECK(riptide_error_code(err) == RIPTIDE_INVALID_ARGUMENT && strstr(riptide_error_message(err), "42") != NULL);
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_backup_engine_restore(engine, 42, damaged, &err));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_backup_engine_delete_backup(engine, 42, &err));
    CHECK(access(damaged, F_OK) != 0);

    /* One changed byte in a stored table: verify and restore report it, naming the file. */
    char shared[320];
    snprintf(shared, sizeof shared, "%s/shared", backups);
    CHECK(corrupt_first_file(shared, victim, sizeof victim) == 0);
    const char *name = strrchr(victim, '/') ? strrchr(victim, '/') + 1 : victim;
    EXPECT(RIPTIDE_CORRUPTION, riptide_backup_engine_verify_backup(engine, first, &err));
    CHECK(riptide_error_code(err) == RIPTIDE_CORRUPTION && strstr(riptide_error_message(err), name) != NULL);
    EXPECT(RIPTIDE_CORRUPTION, riptide_backup_engine_restore(engine, first, damaged, &err));
    CHECK(access(damaged, F_OK) != 0); /* a failed restore leaves nothing */

    /* Delete: the second backup goes, the first stays listed. */
    OK(riptide_backup_engine_delete_backup(engine, second, NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_backup_engine_delete_backup(engine, second, NULL));
    OK(riptide_backup_engine_list_backups(engine, infos, 3, sizeof infos[0], &count, NULL));
    CHECK(count == 1 && infos[0].id == 1);

    /* Bad arguments: NULL, wrong-kind and closed handles, NULL paths and out-parameters. */
    riptide_backup_engine_t *other = NULL;
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_open(NULL, &other, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_open(backups, NULL, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_create_backup(engine, NULL, &second, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_create_backup(engine, db, &second, &err)); /* closed */
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_create_backup(NULL, copy, &second, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_verify_backup((riptide_backup_engine_t *)copy, 1, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_list_backups(engine, NULL, 0, sizeof infos[0], NULL, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_list_backups(engine, NULL, 2, sizeof infos[0], &count, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_list_backups(engine, infos, 2, 0, &count, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_restore(engine, first, NULL, &err));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_delete_backup(NULL, first, &err));
    OK(riptide_error_free(err));
    /* A backup directory under a plain file is an I/O error with errno. */
    char under_file[620];
    snprintf(under_file, sizeof under_file, "%s/x", victim);
    err = NULL;
    riptide_code_t code = riptide_backup_engine_open(under_file, &other, &err);
    CHECK(code == RIPTIDE_IO && other == NULL);
    if (code == RIPTIDE_IO) CHECK(riptide_error_os_code(err) != 0);
    OK(riptide_error_free(err));
    OK(riptide_backup_engine_close(engine));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_close(engine));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_close(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_backup_engine_verify_backup(engine, first, NULL));
}

/* Every misuse the header promises to catch, for every kind of handle. */
/* Range deletes and single deletes. */
static void test_range_deletes(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "ranges", NULL, &cf, NULL));
    const char *keys[] = {"a", "b", "c", "d", "e", "f"};
    for (size_t i = 0; i < 6; i++) {
        OK(riptide_put(db, NULL, K(keys[i]), K("v"), NULL));
        OK(riptide_put_cf(db, NULL, cf, K(keys[i]), K("w"), NULL));
    }
    OK(riptide_flush(db, NULL));
    /* [b, d) in the default column family, [e, z) in "ranges". */
    OK(riptide_delete_range(db, NULL, K("b"), K("d"), NULL));
    OK(riptide_delete_range_cf(db, NULL, cf, K("e"), K("z"), NULL));
    expect_value(db, NULL, "a", "v");
    expect_value(db, NULL, "b", NULL);
    expect_value(db, NULL, "c", NULL);
    expect_value(db, NULL, "d", "v");
    uint8_t *value = NULL;
    size_t len = 0;
    OK(riptide_get_cf(db, NULL, cf, K("e"), &value, &len, NULL));
    CHECK(value == NULL);
    OK(riptide_get_cf(db, NULL, cf, K("d"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == 'w');
    riptide_free(value);
    /* In a batch, records apply in order: the put after the range delete survives it. */
    riptide_batch_t *batch = NULL;
    OK(riptide_batch_create(&batch, NULL));
    OK(riptide_batch_delete_range(batch, K("a"), K("f"), NULL));
    OK(riptide_batch_put(batch, K("c"), K("again"), NULL));
    OK(riptide_batch_delete_range_cf(batch, cf, K("a"), K("c"), NULL));
    OK(riptide_write(db, NULL, batch, NULL));
    OK(riptide_batch_destroy(batch));
    expect_value(db, NULL, "a", NULL);
    expect_value(db, NULL, "c", "again");
    expect_value(db, NULL, "d", NULL);
    expect_value(db, NULL, "f", "v");
    OK(riptide_get_cf(db, NULL, cf, K("b"), &value, &len, NULL));
    CHECK(value == NULL);
    /* Single deletes, directly and in a batch, in both column families. */
    OK(riptide_put(db, NULL, K("s1"), K("v"), NULL));
    OK(riptide_put_cf(db, NULL, cf, K("s2"), K("v"), NULL));
    OK(riptide_single_delete(db, NULL, NULL, K("s1"), NULL));
    expect_value(db, NULL, "s1", NULL);
    OK(riptide_batch_create(&batch, NULL));
    OK(riptide_batch_single_delete(batch, cf, K("s2"), NULL));
    OK(riptide_batch_single_delete(batch, NULL, K("f"), NULL));
    OK(riptide_write(db, NULL, batch, NULL));
    OK(riptide_batch_destroy(batch));
    expect_value(db, NULL, "f", NULL);
    OK(riptide_get_cf(db, NULL, cf, K("s2"), &value, &len, NULL));
    CHECK(value == NULL);
    OK(riptide_flush(db, NULL));
    expect_value(db, NULL, "s1", NULL);
    /* Bad arguments: a NULL key with a length, a closed handle. */
    EXPECT(RIPTIDE_MISUSE, riptide_delete_range(db, NULL, NULL, 3, K("z"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_single_delete(db, NULL, NULL, NULL, 2, NULL));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_delete_range(db, NULL, K("a"), K("b"), NULL));
}

static void test_time_to_live(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    riptide_cf_options_t *cf_options = NULL;
    OK(riptide_cf_options_create(&cf_options, NULL));
    OK(riptide_cf_options_set_ttl_us(cf_options, 3600ull * 1000000ull, NULL));
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "sessions", cf_options, &cf, NULL));
    OK(riptide_cf_options_destroy(cf_options));
    uint64_t now_us = 0;
    OK(riptide_now_us(db, &now_us, NULL));
    CHECK(now_us > 1700000000ull * 1000000ull);
    /* An hour to live: readable now. */
    OK(riptide_put_with_ttl(db, NULL, NULL, K("hour"), K("v"), 3600ull * 1000000ull, NULL));
    OK(riptide_put_with_ttl(db, NULL, cf, K("hour"), K("w"), 3600ull * 1000000ull, NULL));
    OK(riptide_put_cf(db, NULL, cf, K("by-family-ttl"), K("x"), NULL));
    expect_value(db, NULL, "hour", "v");
    /* Explicit expiries in a batch: one already past, one in an hour. */
    riptide_batch_t *batch = NULL;
    OK(riptide_batch_create(&batch, NULL));
    OK(riptide_batch_put_with_expiry(batch, NULL, K("past"), K("p"), now_us - 1, NULL));
    OK(riptide_batch_put_with_expiry(batch, cf, K("future"), K("f"), now_us + 3600ull * 1000000ull, NULL));
    OK(riptide_write(db, NULL, batch, NULL));
    OK(riptide_batch_destroy(batch));
    expect_value(db, NULL, "past", NULL);
    uint8_t *value = NULL;
    size_t len = 0;
    OK(riptide_get_cf(db, NULL, cf, K("future"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == 'f');
    riptide_free(value);
    OK(riptide_get_cf(db, NULL, cf, K("by-family-ttl"), &value, &len, NULL));
    CHECK(value && len == 1 && value[0] == 'x');
    riptide_free(value);
    OK(riptide_flush(db, NULL));
    expect_value(db, NULL, "past", NULL);
    expect_value(db, NULL, "hour", "v");
    /* A zero time to live is refused. */
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_put_with_ttl(db, NULL, NULL, K("k"), K("v"), 0, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_now_us(db, NULL, NULL));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
}

static uint64_t read_counter(riptide_db_t *db, riptide_cf_t *cf, const char *key) {
    uint8_t *value = NULL;
    size_t len = 0;
    uint64_t counter = UINT64_MAX;
    if (cf) OK(riptide_get_cf(db, NULL, cf, (const uint8_t *)key, strlen(key), &value, &len, NULL));
    else OK(riptide_get(db, NULL, (const uint8_t *)key, strlen(key), &value, &len, NULL));
    if (value && len == 8) memcpy(&counter, value, 8); /* little endian on every target we build */
    riptide_free(value);
    return counter;
}

static void test_merge_operators(void) {
    char path[300];
    new_path(path, sizeof path);
    riptide_options_t *options = NULL;
    OK(riptide_options_create(&options, NULL));
    OK(riptide_options_set_create_if_missing(options, 1, NULL));
    OK(riptide_options_set_merge_operator(options, "riptide.u64add", NULL));
    EXPECT(RIPTIDE_INVALID_ARGUMENT, riptide_options_set_merge_operator(options, "no-such-operator", NULL));
    riptide_db_t *db = NULL;
    OK(riptide_open(path, options, &db, NULL));
    riptide_cf_options_t *cf_options = NULL;
    OK(riptide_cf_options_create(&cf_options, NULL));
    OK(riptide_cf_options_set_merge_operator(cf_options, "riptide.u64add", NULL));
    riptide_cf_t *cf = NULL;
    OK(riptide_create_column_family(db, "counters", cf_options, &cf, NULL));
    OK(riptide_cf_options_destroy(cf_options));
    uint64_t one = 1, two = 2, forty = 40;
    OK(riptide_put(db, NULL, K("hits"), (const uint8_t *)&forty, 8, NULL));
    OK(riptide_merge(db, NULL, NULL, K("hits"), (const uint8_t *)&one, 8, NULL));
    OK(riptide_merge(db, NULL, cf, K("views"), (const uint8_t *)&two, 8, NULL));
    riptide_batch_t *batch = NULL;
    OK(riptide_batch_create(&batch, NULL));
    OK(riptide_batch_merge(batch, NULL, K("hits"), (const uint8_t *)&one, 8, NULL));
    OK(riptide_batch_merge(batch, cf, K("views"), (const uint8_t *)&two, 8, NULL));
    OK(riptide_write(db, NULL, batch, NULL));
    OK(riptide_batch_destroy(batch));
    CHECK(read_counter(db, NULL, "hits") == 42);
    CHECK(read_counter(db, cf, "views") == 4);
    OK(riptide_flush(db, NULL));
    OK(riptide_compact_range(db, NULL, NULL, 0, NULL, 0, NULL));
    CHECK(read_counter(db, NULL, "hits") == 42);
    /* An operand the counter cannot add makes the read fail with corruption. */
    OK(riptide_merge(db, NULL, NULL, K("hits"), K("x"), NULL));
    uint8_t *value = NULL;
    size_t len = 0;
    EXPECT(RIPTIDE_CORRUPTION, riptide_get(db, NULL, K("hits"), &value, &len, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_merge(db, NULL, NULL, NULL, 3, K("v"), NULL));
    OK(riptide_cf_destroy(cf));
    OK(riptide_close(db, NULL));
    OK(riptide_options_destroy(options));
}

static void test_misuse(void) {
    char path[300], path2[300];
    new_path(path, sizeof path);
    new_path(path2, sizeof path2);
    riptide_db_t *db = open_db(path), *other = open_db(path2);
    uint8_t *value = NULL;
    size_t len = 0;
    /* NULL handles. */
    EXPECT(RIPTIDE_MISUSE, riptide_put(NULL, NULL, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_close(NULL, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_options_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_cf_options_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_readoptions_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_writeoptions_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_options_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_snapshot_release(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_cf_destroy(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_pinnable_release(NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_begin(NULL, NULL, NULL, NULL));
    /* NULL out-parameters and strings. */
    EXPECT(RIPTIDE_MISUSE, riptide_open(path, NULL, NULL, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_open(NULL, NULL, &other, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_create_column_family(db, NULL, NULL, NULL, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_snapshot_create(db, NULL, NULL));
    /* A handle of the wrong kind, and values that were never handles. */
    riptide_batch_t *batch = NULL;
    OK(riptide_batch_create(&batch, NULL));
    riptide_error_t *err = NULL;
    EXPECT(RIPTIDE_MISUSE, riptide_put((riptide_db_t *)batch, NULL, K("k"), K("v"), &err));
    CHECK(strstr(riptide_error_message(err), "riptide_batch_t") != NULL);
    OK(riptide_error_free(err));
    int local = 0;
    EXPECT(RIPTIDE_MISUSE, riptide_put((riptide_db_t *)&local, NULL, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_destroy((riptide_batch_t *)(uintptr_t)0xdeadbeefa9ULL));
    /* Options after destroy. */
    riptide_options_t *o = NULL;
    OK(riptide_options_create(&o, NULL));
    OK(riptide_options_destroy(o));
    EXPECT(RIPTIDE_MISUSE, riptide_options_set_memtable_size_bytes(o, 1 << 20, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_options_destroy(o));
    EXPECT(RIPTIDE_MISUSE, riptide_open(path, o, &other, NULL));
    riptide_readoptions_t *ro = NULL;
    OK(riptide_readoptions_create(&ro, NULL));
    OK(riptide_readoptions_destroy(ro));
    EXPECT(RIPTIDE_MISUSE, riptide_get(db, ro, K("k"), &value, &len, NULL));
    riptide_writeoptions_t *wo = NULL;
    OK(riptide_writeoptions_create(&wo, NULL));
    OK(riptide_writeoptions_destroy(wo));
    EXPECT(RIPTIDE_MISUSE, riptide_put(db, wo, K("k"), K("v"), NULL));
    riptide_txn_options_t *to = NULL;
    OK(riptide_txn_options_create(&to, NULL));
    OK(riptide_txn_options_destroy(to));
    riptide_txn_t *t = NULL;
    EXPECT(RIPTIDE_MISUSE, riptide_txn_begin(db, to, &t, NULL));
    riptide_cf_options_t *co = NULL;
    OK(riptide_cf_options_create(&co, NULL));
    OK(riptide_cf_options_destroy(co));
    riptide_cf_t *cf = NULL;
    EXPECT(RIPTIDE_MISUSE, riptide_create_column_family(db, "x", co, &cf, NULL));
    /* Wrong database: column family, snapshot (through read options), batch. */
    OK(riptide_create_column_family(db, "mine", NULL, &cf, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_put_cf(other, NULL, cf, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_get_cf(other, NULL, cf, K("k"), &value, &len, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_drop_column_family(other, cf, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_create_cf(other, NULL, cf, NULL, NULL));
    riptide_snapshot_t *snap = NULL;
    OK(riptide_snapshot_create(db, &snap, NULL));
    OK(riptide_readoptions_create(&ro, NULL));
    OK(riptide_readoptions_set_snapshot(ro, snap, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_get(other, ro, K("k"), &value, &len, NULL));
    riptide_iterator_t *it = NULL;
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_create(other, ro, &it, NULL));
    OK(riptide_iterator_create(db, ro, &it, NULL));
    /* Double close, and every child handle unusable after close. */
    riptide_txn_t *live = NULL;
    OK(riptide_txn_begin(db, NULL, &live, NULL));
    OK(riptide_close(db, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_close(db, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_put(db, NULL, K("k"), K("v"), NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_get(db, NULL, K("k"), &value, &len, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_snapshot_sequence(snap, NULL, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_snapshot_release(snap));
    EXPECT(RIPTIDE_MISUSE, riptide_iterator_seek_to_first(it, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_txn_commit(live, NULL));
    EXPECT(RIPTIDE_MISUSE, riptide_cf_destroy(cf));
    /* The batch is not tied to the closed database and stays usable. */
    OK(riptide_batch_put(batch, K("k"), K("v"), NULL));
    OK(riptide_write(other, NULL, batch, NULL));
    OK(riptide_batch_destroy(batch));
    EXPECT(RIPTIDE_MISUSE, riptide_batch_count(batch, &len, NULL));
    OK(riptide_readoptions_destroy(ro));
    OK(riptide_close(other, NULL));
}

/* ---- Threads ---- */

struct worker {
    riptide_db_t *db;
    riptide_txn_t *txn;
    int id;
    int failures;
};

static void *put_get_worker(void *arg) {
    struct worker *w = arg;
    char key[32], value[32];
    for (int i = 0; i < 500; i++) {
        snprintf(key, sizeof key, "t%d-%d", w->id, i);
        snprintf(value, sizeof value, "v%d", i);
        if (riptide_put(w->db, NULL, (const uint8_t *)key, strlen(key), (const uint8_t *)value, strlen(value), NULL))
            w->failures++;
        uint8_t *got = NULL;
        size_t len = 0;
        if (riptide_get(w->db, NULL, (const uint8_t *)key, strlen(key), &got, &len, NULL) || !got ||
            len != strlen(value) || memcmp(got, value, len) != 0)
            w->failures++;
        riptide_free(got);
        /* Each thread has its own iterator; the database is shared. */
        if (i % 100 == 0) {
            riptide_iterator_t *it = NULL;
            if (riptide_iterator_create(w->db, NULL, &it, NULL)) w->failures++;
            riptide_iterator_seek(it, (const uint8_t *)key, strlen(key), NULL);
            if (!riptide_iterator_valid(it)) w->failures++;
            if (riptide_iterator_destroy(it)) w->failures++;
        }
        /* Errors made in one thread are freed in it. */
        riptide_error_t *err = NULL;
        if (riptide_put(NULL, NULL, (const uint8_t *)key, 1, NULL, 0, &err) != RIPTIDE_MISUSE) w->failures++;
        riptide_error_free(err);
    }
    return NULL;
}

static void *txn_worker(void *arg) {
    struct worker *w = arg;
    char key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "shared-%d-%d", w->id, i);
        if (riptide_txn_put(w->txn, (const uint8_t *)key, strlen(key), (const uint8_t *)"x", 1, NULL)) w->failures++;
        uint8_t *got = NULL;
        size_t len = 0;
        if (riptide_txn_get(w->txn, (const uint8_t *)key, strlen(key), &got, &len, NULL) || !got) w->failures++;
        riptide_free(got);
    }
    return NULL;
}

/* Uses the database until it is closed under it: every call must return OK or MISUSE. */
static void *racing_worker(void *arg) {
    struct worker *w = arg;
    for (int i = 0; i < 100000; i++) {
        riptide_code_t code = riptide_put(w->db, NULL, K("race"), K("v"), NULL);
        if (code == RIPTIDE_MISUSE) break;
        if (code != RIPTIDE_OK && code != RIPTIDE_CLOSED) w->failures++;
        riptide_snapshot_t *snap = NULL;
        code = riptide_snapshot_create(w->db, &snap, NULL);
        if (code == RIPTIDE_OK) riptide_snapshot_release(snap); /* may already be released by close */
    }
    return NULL;
}

static void test_threads(void) {
    enum { THREADS = 4 };
    char path[300];
    new_path(path, sizeof path);
    riptide_db_t *db = open_db(path);
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){.db = db, .id = i};
        CHECK(pthread_create(&threads[i], NULL, put_get_worker, &workers[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(workers[i].failures == 0);
    }
    /* One transaction shared by several threads. */
    riptide_txn_t *txn = NULL;
    OK(riptide_txn_begin(db, NULL, &txn, NULL));
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){.db = db, .txn = txn, .id = i};
        CHECK(pthread_create(&threads[i], NULL, txn_worker, &workers[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(workers[i].failures == 0);
    }
    uint64_t writes = 0;
    OK(riptide_txn_info(txn, NULL, &writes, NULL, NULL, NULL));
    CHECK(writes == THREADS * 200);
    OK(riptide_txn_commit(txn, NULL));
    OK(riptide_txn_destroy(txn));
    expect_value(db, NULL, "shared-3-199", "x");
    /* Close while other threads are using the database. */
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){.db = db, .id = i};
        CHECK(pthread_create(&threads[i], NULL, racing_worker, &workers[i]) == 0);
    }
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    OK(riptide_close(db, NULL));
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(workers[i].failures == 0);
    }
}

struct test {
    const char *name;
    void (*run)(void);
};

int main(void) {
    snprintf(base_dir, sizeof base_dir, "%s/riptide-abi-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(base_dir)) {
        perror("mkdtemp");
        return 2;
    }
    const struct test tests[] = {
        {"version", test_version},
        {"errors", test_errors},
        {"options", test_options},
        {"put_get", test_put_get},
        {"batches", test_batches},
        {"column_families", test_column_families},
        {"iterators_and_snapshots", test_iterators_and_snapshots},
        {"iterator_batches", test_iterator_batches},
        {"transactions", test_transactions},
        {"shared_locks", test_shared_locks},
        {"two_phase_commit", test_two_phase_commit},
        {"stats_and_maintenance", test_stats_and_maintenance},
        {"blob_files", test_blob_files},
        {"backups", test_backups},
        {"range_deletes", test_range_deletes},
        {"time_to_live", test_time_to_live},
        {"merge_operators", test_merge_operators},
        {"misuse", test_misuse},
        {"threads", test_threads},
    };
    int passed = 0, failed = 0;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        check_failures = 0;
        tests[i].run();
        printf("test c_abi::%s ... %s\n", tests[i].name, check_failures ? "FAILED" : "ok");
        if (check_failures) failed++;
        else passed++;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    printf("\ntest result: %s. %d passed; %d failed; 0 ignored; 0 measured; 0 filtered out; finished in %.2fs\n\n",
           failed ? "FAILED" : "ok", passed, failed, seconds);
    char command[400];
    snprintf(command, sizeof command, "rm -rf '%s'", base_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", base_dir);
    return failed ? 1 : 0;
}
