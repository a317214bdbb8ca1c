// The data dictionary: how a MariaDB table maps onto Riptide (docs/sql/storage.md). Each
// table owns one column family, named after the table's path; inside it every index has a
// one-byte id (key_encoding.h) and the metadata records live under the id 0xFF:
//
//   0xFF 'D'  the dictionary record: format versions and each index's id, flags and key parts,
//             written (synced) when the table is created and checked against the .frm at open;
//   0xFF 'A'  the AUTO_INCREMENT counter: the next value, 8 bytes big-endian;
//   0xFF 'C'  index statistics from ANALYZE TABLE (rows per distinct prefix of each index).
//
// Also the TableShare: what every open handler of one table shares.
//
// Concurrency contract: the share's column family handle and dictionary are set when the share
// is created (under the server's share lock) and replaced only by TRUNCATE, which holds an
// exclusive metadata lock, so no other handler of the table runs then. Counters are atomics;
// the statistics cache has its own mutex.
#ifndef RIPTIDE_MARIADB_DICTIONARY_H
#define RIPTIDE_MARIADB_DICTIONARY_H

#include <my_global.h>
#include <handler.h>
#include <thr_lock.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "riptide.h"

namespace riptide_sql {

// The format of the dictionary record.
constexpr unsigned kDictionaryVersion = 1;

// The metadata record keys.
extern const std::string kDictionaryKey;
extern const std::string kAutoIncrementKey;
extern const std::string kStatisticsKey;

// The column family that holds table `path` (the server's table path, e.g. "./test/t1").
std::string table_family_name(const char *path);

// The dictionary record that describes `table`'s indexes (see the file comment and
// docs/sql/storage.md for the bytes).
std::string dictionary_record(const TABLE *table);

// Creates the column family of table `path` and writes its dictionary record and, when
// `auto_increment` is above 1, its counter. A column family left by a crashed CREATE (the
// server found no .frm, so it is nobody's) is dropped first. Returns 0 or a handler error.
int create_table_family(const char *path, const TABLE *table, uint64_t auto_increment);

// Drops the column family of table `path` (ENOENT when it has none).
int drop_table_family(const char *path);

// Renames the column family of table `from` to that of `to`.
int rename_table_family(const char *from, const char *to);

// What every handler of one table shares.
class TableShare : public Handler_share {
 public:
  TableShare();
  ~TableShare() override;

  THR_LOCK lock;
  // The path the server opened the table under: the table's ("./db/t"), or one partition's
  // ("./db/t#P#p0"), which the partition handler opens as a table of its own.
  std::string path;
  // The table's column family.
  riptide_cf_t *family = nullptr;
  // The next hidden row id (tables without a primary key).
  std::atomic<uint64_t> next_row_id{1};
  // The next AUTO_INCREMENT value; persisted (kAutoIncrementKey) whenever it grows.
  std::atomic<uint64_t> next_auto_increment{1};

  // Estimates for info(), refreshed at most once a second (riptide_approximate_range_stats).
  std::mutex stats_mutex;
  uint64_t rows = 0;
  uint64_t data_bytes = 0;
  uint64_t stats_time_us = 0;
  // Rows per distinct value of each index's first 1..n parts (index number -> parts), from
  // ANALYZE TABLE; empty until then.
  std::vector<std::vector<uint64_t>> rows_per_key;
  // The row estimate rows_per_key was computed at, and when it was last estimated.
  uint64_t rows_at_estimate = 0;
  uint64_t estimate_time_us = 0;

  // Opens the share of `table` opened under `path` (column family, dictionary check,
  // counters). Returns 0 or a handler error.
  int load(TABLE *table, const char *path);
  // Moves the AUTO_INCREMENT counter to at least `next` and persists it.
  int raise_auto_increment(uint64_t next);
  // Persists `next` as the counter if it is above what was persisted (or `always`).
  int persist_auto_increment(uint64_t next, bool always = false);
  // Refreshes rows and data_bytes if they are older than a second (or `force`).
  void refresh_statistics(bool force);
  // Stores rows_per_key in memory and, when `persist` (ANALYZE TABLE), in kStatisticsKey.
  int save_rows_per_key(const std::vector<std::vector<uint64_t>> &values, bool persist);
  // True when rows_per_key is missing or was computed at less than half or more than twice
  // the current row estimate, and no estimate was made in the last ten seconds (the caller then
  // makes one).
  bool rows_per_key_stale();
  // Re-creates the table's column family empty (TRUNCATE), keeping the dictionary record.
  int recreate(TABLE *table);

 private:
  int load_counters(TABLE *table);
  void load_rows_per_key(TABLE *table);

  // Orders writes of the persisted counter, so a smaller value never overwrites a larger one.
  std::mutex auto_increment_mutex_;
  uint64_t persisted_auto_increment_ = 0;
};

}  // namespace riptide_sql

#endif
