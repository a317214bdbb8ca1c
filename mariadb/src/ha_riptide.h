// The handler: one open RIPTIDE table. Rows are stored under their primary key (or a hidden
// 8-byte row id when the table has none) in the table's column family; secondary index entries
// beside them under their own index id (docs/sql/storage.md, docs/sql/key_encoding.md).
// ha_riptide.cc holds DDL and writes, ha_riptide_read.cc scans and index reads,
// ha_riptide_admin.cc statistics for the optimizer and ANALYZE / OPTIMIZE / CHECK TABLE.
//
// Concurrency contract: a handler is used by one thread at a time (the server's rule); the
// table's share (dictionary.h) is shared by all handlers of the table. Every read and write
// goes through the connection's Riptide transaction (transaction.h), whose locks order
// concurrent writers.
#ifndef RIPTIDE_MARIADB_HA_RIPTIDE_H
#define RIPTIDE_MARIADB_HA_RIPTIDE_H

#include <my_global.h>
#include <handler.h>
#include <thr_lock.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dictionary.h"
#include "row_format.h"
#include "riptide.h"

// File extensions of a RIPTIDE table: none (its data lives in the engine's database).
extern const char *ha_riptide_extensions[];

class ha_riptide final : public handler {
 public:
  ha_riptide(handlerton *hton, TABLE_SHARE *table_share);
  ~ha_riptide() override;

  const char *table_type() const { return "RIPTIDE"; }
  ulonglong table_flags() const override;
  ulong index_flags(uint index, uint part, bool all_parts) const override;
  uint max_supported_keys() const override { return 64; }
  uint max_supported_key_parts() const override { return 16; }
  uint max_supported_key_length() const override { return 3072; }
  uint max_supported_key_part_length() const override { return 3072; }
  const char *index_type(uint) override { return "BTREE"; }
  uint8 table_cache_type() override { return HA_CACHE_TBL_TRANSACT; }

  // DDL (ha_riptide.cc).
  int create(const char *name, TABLE *form, HA_CREATE_INFO *info) override;
  int delete_table(const char *name) override;
  int rename_table(const char *from, const char *to) override;
  int open(const char *name, int mode, uint test_if_locked) override;
  int close() override;
  int delete_all_rows() override;
  int truncate() override;
  void update_create_info(HA_CREATE_INFO *info) override;

  // Locks and transactions (ha_riptide.cc).
  int external_lock(THD *thd, int lock_type) override;
  int start_stmt(THD *thd, thr_lock_type lock_type) override;
  THR_LOCK_DATA **store_lock(THD *thd, THR_LOCK_DATA **to, enum thr_lock_type lock_type) override;

  // Writes (ha_riptide.cc).
  int write_row(const uchar *buf) override;
  int update_row(const uchar *old_data, const uchar *new_data) override;
  int delete_row(const uchar *buf) override;
  void get_auto_increment(ulonglong offset, ulonglong increment, ulonglong nb_desired_values,
                          ulonglong *first_value, ulonglong *nb_reserved_values) override;
  int reset_auto_increment(ulonglong value) override;

  // Reads (ha_riptide_read.cc).
  int index_init(uint index, bool sorted) override;
  int index_end() override;
  int index_read_map(uchar *buf, const uchar *key, key_part_map keypart_map,
                     enum ha_rkey_function find_flag) override;
  int index_read_last_map(uchar *buf, const uchar *key, key_part_map keypart_map) override;
  int index_next(uchar *buf) override;
  int index_prev(uchar *buf) override;
  int index_first(uchar *buf) override;
  int index_last(uchar *buf) override;
  int index_next_same(uchar *buf, const uchar *key, uint key_length) override;
  int rnd_init(bool scan) override;
  int rnd_next(uchar *buf) override;
  int rnd_end() override;
  int rnd_pos(uchar *buf, uchar *pos) override;
  void position(const uchar *record) override;
  Item *idx_cond_push(uint keyno, Item *idx_cond) override;
  int reset() override;

  // Statistics and maintenance (ha_riptide_admin.cc).
  int info(uint flag) override;
  ha_rows records_in_range(uint index, const key_range *min_key, const key_range *max_key,
                           page_range *pages) override;
  int analyze(THD *thd, HA_CHECK_OPT *check_opt) override;
  int optimize(THD *thd, HA_CHECK_OPT *check_opt) override;
  int check(THD *thd, HA_CHECK_OPT *check_opt) override;

 private:
  // The connection's transaction (begun by external_lock or start_stmt), or nullptr.
  riptide_txn_t *transaction();
  riptide_cf_t *family() const { return share_->family; }

  // Encoding (ha_riptide.cc).
  // The primary key of `record`: index id 0 and the key parts, or the hidden row id (taken
  // from current_primary_key_, the row read last).
  void primary_key_of(const uchar *record, std::string *out);
  // The key of index `index`'s entry for `record`; sets `*unique_form` when the entry is keyed
  // by the index's values alone (a unique index and no NULL part), so that a second row with
  // the same values finds it; otherwise the primary key follows the values.
  void entry_key_of(uint index, const uchar *record, const std::string &primary_key, std::string *out,
                    bool *unique_form);
  // The value of a secondary entry: the primary key's length (2 bytes) and bytes, then the
  // index's key image and the primary key's key image (for index-only reads).
  void entry_value_of(uint index, const uchar *record, const std::string &primary_key, std::string *out);

  // Writing (ha_riptide.cc).
  // Fails with HA_ERR_FOUND_DUPP_KEY (errkey set) when `key` exists, after locking it.
  int check_unique(uint index, const std::string &key);
  int put(const std::string &key, const std::string &value);
  int remove(const std::string &key);
  // Moves the AUTO_INCREMENT counter past `field`'s value.
  int raise_auto_increment_past(Field *field);
  // The full stored row of `primary_key` into record_ (update and delete of a row read
  // index-only).
  const uchar *full_row(const uchar *buf);

  // Statistics (ha_riptide_admin.cc): rows per distinct value of each index prefix, from the
  // first `limit` entries of each index.
  int count_rows_per_key(uint64_t limit, std::vector<std::vector<uint64_t>> *out);
  void estimate_rows_per_key_if_stale();

  // Reading (ha_riptide_read.cc).
  // Makes iterator_ an iterator of the connection's transaction over index scan_id_, not
  // positioned: the parked one when it reads exactly as a new one would, else a new one.
  int ensure_iterator();
  // Destroys the iterator (see the members below for whose iterator may be destroyed here).
  void drop_iterator();
  // Keeps the iterator for a later scan of the same index in the same transaction (the end of
  // a scan or of a statement); ensure_iterator decides whether it can serve that scan.
  void park_iterator();
  // Whether the parked iterator reads exactly as a new iterator of the transaction would.
  bool parked_iterator_reads_as_new();
  // Reads the value of `key` through the transaction, locking it first when the statement
  // locks the rows it reads. `*found` tells whether it exists.
  int get(const std::string &key, bool lock, std::string *value, bool *found);
  // Unpacks a stored row into `buf`.
  int unpack(uchar *buf, const std::string &primary_key, const std::string &row);
  int unpack(uchar *buf, const uint8_t *primary_key, size_t primary_key_length, const uint8_t *row,
             size_t row_length);
  // Reads the row the iterator's current entry stands for into `buf`, moving on in the given
  // direction past entries that are not rows for this read (rejected by the pushed index
  // condition, or deleted since). HA_ERR_END_OF_FILE when the iterator leaves the active index
  // or the prefix being read.
  int read_entry(uchar *buf, bool forward);
  int move(bool forward);
  // index_next / index_prev / index_next_same: a step of the scan and the read of its row.
  int step(uchar *buf, bool forward);
  // Point read of a whole unique key (the primary key, or a unique index without NULLs).
  int point_read(uchar *buf, const std::string &key);
  // The encoded search key for a server key tuple.
  void search_key(uint index, const uchar *key, key_part_map keypart_map, std::string *out);

  riptide_sql::TableShare *share_ = nullptr;
  THR_LOCK_DATA lock_data_;
  // Whether the current statement locks the rows it reads (UPDATE, DELETE, SELECT ... FOR
  // UPDATE / LOCK IN SHARE MODE, REPLACE and INSERT ... ON DUPLICATE KEY UPDATE).
  bool lock_rows_ = false;
  // Whether those row locks are shared (SELECT ... LOCK IN SHARE MODE) rather than exclusive.
  bool share_rows_ = false;
  // The iterator of the current scan, or a parked one that a later scan of the same index in
  // the same transaction may take over instead of creating its own: creating an iterator and
  // dropping it cost about a fifth of a range query's engine time in sysbench's read_only.
  riptide_iterator_t *iterator_ = nullptr;
  // Options of the iterators (bounds set per index), created on first use.
  riptide_readoptions_t *read_options_ = nullptr;
  // The index whose bounds read_options_ holds, when read_options_bounded_.
  uchar read_options_scan_id_ = 0;
  bool read_options_bounded_ = false;
  // The transaction the iterator belongs to (a new transaction needs a new iterator).
  riptide_txn_t *iterator_transaction_ = nullptr;
  // The connection whose transaction created the iterator. Only that connection's thread
  // destroys it: a handler parked with an iterator of a transaction that is still open may be
  // taken by another connection (the table cache hands tables from one to the next), whose
  // destroy could race with the owner's commit; it forgets the iterator instead, and the
  // owner's commit or rollback destroys it (the C ABI ends a transaction's iterators with it).
  THD *iterator_thd_ = nullptr;
  // The index the iterator is bounded to, and the connection's write generation when it was
  // created (its copy of the transaction's own writes is from then).
  uchar iterator_scan_id_ = 0;
  uint64_t iterator_generation_ = 0;
  // True between the end of the scan that used the iterator and the next one that takes it.
  bool iterator_parked_ = false;
  // The entry a step of the iterator landed on (move reads it with the step), for the
  // read_entry that follows; ready only between the two.
  struct Step {
    const uint8_t *key = nullptr;
    size_t key_length = 0;
    const uint8_t *value = nullptr;
    size_t value_length = 0;
    bool ready = false;
  } step_;
  // Read-ahead of a forward scan, as InnoDB's row prefetch: after a few single steps of one
  // scan, runs of entries are copied into `buffer` by one riptide_iterator_next_batch call each
  // (one handle lookup and one lock per run instead of per row), up to the end of the range the
  // server reads (`stop_key`) when it gave one. While copied entries are held, or after a run
  // that stopped short, the iterator stands on the first entry not copied or past the last
  // (`ahead`), not on the entry returned last. Not used by locking reads (each row is locked
  // and read again anyway) or under SERIALIZABLE (reading ahead would widen the ranges its
  // iterators record for the commit's validation).
  struct ReadAhead {
    std::vector<uint8_t> buffer;
    size_t entries = 0;
    size_t taken = 0;
    size_t offset = 0;
    size_t runs = 0;
    unsigned single_steps = 0;
    bool ahead = false;
    bool off = false;
    bool stop_known = false;
    std::string stop_key;
  } read_ahead_;
  // How rows of `table` decode (built on first use for the TABLE this handler serves).
  riptide_sql::RowPlan row_plan_;
  // Forgets the read-ahead (a new position of the iterator, or none).
  void reset_read_ahead();
  // The next forward step through the read-ahead: 0 with step_ ready, a handler error, or -1
  // when this step is to be taken singly.
  int read_ahead_step();
  // rnd_init was called and rnd_next has not positioned the scan yet: a scan for rnd_pos alone
  // (a sort's result read by row position) never positions one.
  bool scan_pending_ = false;
  // The index id the iterator is confined to (kPrimaryIndexId for full scans).
  uchar scan_id_ = 0;
  // Whether the full scan has returned its first row (rnd_next moves before reading after that).
  bool scan_started_ = false;
  // After a point read no iterator is positioned: index_next_same ends (a unique key has one
  // row), index_next and index_prev position one from the key looked up (reposition_).
  bool point_positioned_ = false;
  bool reposition_ = false;
  // The key of the entry read last, so a scan can go on in a later statement (HANDLER).
  std::string position_key_;
  // For exact and prefix reads: the encoded prefix every returned entry starts with.
  std::string same_prefix_;
  // The primary key of the row read last, for position(), update_row and delete_row.
  std::string current_primary_key_;
  // The bytes of the row read last: BLOB fields of the record point into them.
  std::string row_bytes_;
  std::string packed_;
  std::string key_buffer_;
  std::string value_buffer_;
  // A record buffer of the table's size, for decoding search keys and re-read rows.
  uchar *record_ = nullptr;
  // The index of the last duplicate-key failure, for info(HA_STATUS_ERRKEY).
  uint duplicate_key_ = 0;
  // Largest primary key: ref is its length (2 bytes) and the key, padded.
  uint primary_key_max_bytes_ = 9;
};

#endif
