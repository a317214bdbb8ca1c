// See ha_riptide.h: what the optimizer learns about a table (info, records_in_range) and
// ANALYZE, OPTIMIZE and CHECK TABLE. Runs on the thread that owns the handler; reads made here
// outside the connection's transaction use a snapshot of their own, so they see one state.
#include <my_global.h>
#include <key.h>
#include <mysqld_error.h>
#include <sql_class.h>

#include <vector>

#include "engine.h"
#include "ha_riptide.h"
#include "key_encoding.h"
#include "row_format.h"

using riptide_sql::database;
using riptide_sql::report;

namespace {

const uint8_t *bytes(const std::string &s) { return reinterpret_cast<const uint8_t *>(s.data()); }

// How many entries ANALYZE TABLE reads per index at most (a table's first entries in key order
// then stand for all of it), and how many the automatic estimate samples.
constexpr uint64_t kAnalyzeEntryLimit = 1000000;
constexpr uint64_t kSampleEntryLimit = 20000;

// An iterator over index `id` of `family`, at `snapshot` (nullptr: the latest state).
int index_iterator(riptide_cf_t *family, uint8_t id, riptide_snapshot_t *snapshot, riptide_iterator_t **out) {
  riptide_readoptions_t *options = nullptr;
  riptide_error_t *error = nullptr;
  const uint8_t upper = static_cast<uint8_t>(id + 1);
  riptide_code_t code = riptide_readoptions_create(&options, &error);
  if (code == RIPTIDE_OK) code = riptide_readoptions_set_lower_bound(options, &id, 1, &error);
  if (code == RIPTIDE_OK) code = riptide_readoptions_set_upper_bound(options, &upper, 1, &error);
  if (code == RIPTIDE_OK && snapshot != nullptr) code = riptide_readoptions_set_snapshot(options, snapshot, &error);
  if (code == RIPTIDE_OK) code = riptide_iterator_create_cf(database(), options, family, out, &error);
  if (options != nullptr) riptide_readoptions_destroy(options);
  if (code == RIPTIDE_OK) code = riptide_iterator_seek_to_first(*out, &error);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

}  // namespace

int ha_riptide::info(uint flag) {
  if (flag & HA_STATUS_VARIABLE) {
    share_->refresh_statistics(false);
    estimate_rows_per_key_if_stale();
    std::lock_guard<std::mutex> guard(share_->stats_mutex);
    // An estimate (entries of the primary index, versions and tombstones included): never 0,
    // which the optimizer could take for an empty table.
    stats.records = share_->rows > 0 ? share_->rows : 1;
    stats.data_file_length = share_->data_bytes;
    stats.mean_rec_length = static_cast<ulong>(share_->rows > 0 ? share_->data_bytes / share_->rows : 0);
    stats.deleted = 0;
  }
  if (flag & HA_STATUS_CONST) {
    std::lock_guard<std::mutex> guard(share_->stats_mutex);
    for (uint index = 0; index < table->s->keys; index++) {
      KEY *key = &table->key_info[index];
      for (uint part = 0; part < key->user_defined_key_parts; part++) {
        ulong value = 0;
        if (index < share_->rows_per_key.size() && part < share_->rows_per_key[index].size())
          value = static_cast<ulong>(share_->rows_per_key[index][part]);
        // A whole unique key names one row.
        if ((key->flags & HA_NOSAME) && part + 1 == key->user_defined_key_parts) value = 1;
        key->rec_per_key[part] = value;
      }
    }
  }
  if (flag & HA_STATUS_AUTO) stats.auto_increment_value = share_->next_auto_increment;
  // The server resets errkey before it asks (handler::get_dup_key).
  if (flag & HA_STATUS_ERRKEY) errkey = duplicate_key_;
  return 0;
}

ha_rows ha_riptide::records_in_range(uint index, const key_range *min_key, const key_range *max_key, page_range *) {
  const uint8_t id = riptide_sql::index_id(table->s, index);
  std::string start(1, static_cast<char>(id));
  std::string end(1, static_cast<char>(id + 1));
  if (min_key != nullptr) {
    search_key(index, min_key->key, min_key->keypart_map, &start);
    if (min_key->flag == HA_READ_AFTER_KEY) start = riptide_sql::prefix_successor(start);
  }
  if (max_key != nullptr) {
    search_key(index, max_key->key, max_key->keypart_map, &end);
    if (max_key->flag != HA_READ_BEFORE_KEY) end = riptide_sql::prefix_successor(end);
  }
  if (end.empty()) end.assign(1, static_cast<char>(id + 1));
  if (start >= end) return 0;
  riptide_range_stats_t range;
  memset(&range, 0, sizeof(range));
  range.struct_size = sizeof(range);
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_approximate_range_stats(database(), family(), bytes(start), start.size(),
                                                              bytes(end), end.size(), &range, &error);
  // Only an error is freed: riptide_error_free(NULL) is a misuse, reported through an error
  // message formatted and thrown away (1 % of mariadbd's CPU in sysbench's read_only).
  if (error != nullptr) riptide_error_free(error);
  if (code != RIPTIDE_OK) return HA_POS_ERROR;
  // Never 0 for a non-empty range: the optimizer would take it for a proof of emptiness.
  return range.entries > 0 ? range.entries : 1;
}

int ha_riptide::count_rows_per_key(uint64_t limit, std::vector<std::vector<uint64_t>> *out) {
  // Counts, per index, the distinct values of its first 1..n parts over its first `limit`
  // entries (parts have fixed widths, so a prefix of parts is a prefix of bytes).
  out->assign(table->s->keys, std::vector<uint64_t>());
  for (uint index = 0; index < table->s->keys; index++) {
    const KEY *key = &table->key_info[index];
    std::vector<size_t> widths;
    size_t width = 1;
    for (uint part = 0; part < key->user_defined_key_parts; part++) {
      width += riptide_sql::key_part_width(&key->key_part[part]);
      widths.push_back(width);
    }
    std::vector<uint64_t> distinct(widths.size(), 0);
    riptide_iterator_t *iterator = nullptr;
    if (index_iterator(family(), riptide_sql::index_id(table->s, index), nullptr, &iterator) != 0)
      return HA_ADMIN_FAILED;
    std::string previous;
    uint64_t entries = 0;
    const uint8_t *entry = nullptr;
    size_t length = 0;
    while (entries < limit && riptide_iterator_current(iterator, &entry, &length, nullptr, nullptr)) {
      for (size_t part = 0; part < widths.size(); part++) {
        const size_t w = std::min(widths[part], length);
        if (entries == 0 || previous.size() < w || memcmp(previous.data(), entry, w) != 0) {
          // A new value of this prefix, hence of every longer one.
          for (size_t longer = part; longer < widths.size(); longer++) distinct[longer]++;
          break;
        }
      }
      previous.assign(reinterpret_cast<const char *>(entry), length);
      entries++;
      if (riptide_iterator_next(iterator, nullptr) != RIPTIDE_OK) break;
    }
    riptide_iterator_destroy(iterator);
    for (size_t part = 0; part < widths.size(); part++)
      (*out)[index].push_back(distinct[part] > 0 ? (entries + distinct[part] - 1) / distinct[part] : 0);
  }
  return 0;
}

int ha_riptide::analyze(THD *, HA_CHECK_OPT *) {
  std::vector<std::vector<uint64_t>> rows_per_key;
  if (count_rows_per_key(kAnalyzeEntryLimit, &rows_per_key) != 0) return HA_ADMIN_FAILED;
  share_->refresh_statistics(true);
  if (share_->save_rows_per_key(rows_per_key, true) != 0) return HA_ADMIN_FAILED;
  info(HA_STATUS_CONST | HA_STATUS_VARIABLE);
  return HA_ADMIN_OK;
}

void ha_riptide::estimate_rows_per_key_if_stale() {
  // Without ANALYZE TABLE (or long after it) the optimizer would have no idea how many rows a
  // value of a non-unique index matches; InnoDB samples its indexes by itself, so a sample of
  // each index's first entries is taken when the table has grown or shrunk past twice its size
  // at the last estimate, at most once every ten seconds per table.
  if (!share_->rows_per_key_stale()) return;
  std::vector<std::vector<uint64_t>> rows_per_key;
  if (count_rows_per_key(kSampleEntryLimit, &rows_per_key) != 0) return;
  share_->save_rows_per_key(rows_per_key, false);
  info(HA_STATUS_CONST);
}

int ha_riptide::optimize(THD *, HA_CHECK_OPT *) {
  // Compaction of the table's column family down the levels: deleted rows give back their
  // space and reads meet fewer tables.
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_compact_range(database(), family(), nullptr, 0, nullptr, 0, &error);
  if (code != RIPTIDE_OK) {
    report(code, error);
    return HA_ADMIN_FAILED;
  }
  share_->refresh_statistics(true);
  return HA_ADMIN_OK;
}

int ha_riptide::check(THD *thd, HA_CHECK_OPT *) {
  // At one snapshot: every row decodes and has each of its secondary entries (pointing back
  // at it), and every index has exactly as many entries as there are rows.
  riptide_snapshot_t *snapshot = nullptr;
  riptide_error_t *error = nullptr;
  riptide_code_t code = riptide_snapshot_create(database(), &snapshot, &error);
  if (code != RIPTIDE_OK) {
    report(code, error);
    return HA_ADMIN_FAILED;
  }
  riptide_readoptions_t *read = nullptr;
  code = riptide_readoptions_create(&read, &error);
  if (code == RIPTIDE_OK) code = riptide_readoptions_set_snapshot(read, snapshot, &error);
  if (code != RIPTIDE_OK) {
    report(code, error);
    riptide_snapshot_release(snapshot);
    return HA_ADMIN_FAILED;
  }
  uint64_t rows = 0;
  uint64_t problems = 0;
  // Every column is decoded and every virtual column computed (they may be indexed).
  MY_BITMAP *old_read_set = table->read_set;
  MY_BITMAP *old_write_set = table->write_set;
  table->use_all_columns();
  riptide_iterator_t *iterator = nullptr;
  int status = index_iterator(family(), riptide_sql::kPrimaryIndexId, snapshot, &iterator) ? HA_ADMIN_FAILED : 0;
  std::string row;
  std::string primary_key;
  std::string expected_key;
  std::string expected_value;
  while (status == 0 && riptide_iterator_valid(iterator)) {
    size_t key_length = 0;
    size_t value_length = 0;
    const uint8_t *key = riptide_iterator_key(iterator, &key_length);
    const uint8_t *value = riptide_iterator_value(iterator, &value_length);
    primary_key.assign(reinterpret_cast<const char *>(key), key_length);
    row.assign(reinterpret_cast<const char *>(value), value_length);
    rows++;
    // Decoded into record[0]: key images of some types (BIT) are only right from there.
    uchar *record = table->record[0];
    if (!riptide_sql::unpack_row(table, record, bytes(row), row.size())) {
      problems++;
    } else {
      // Indexed virtual columns are computed, as after any read.
      if (table->vfield) table->update_virtual_fields(this, VCOL_UPDATE_FOR_READ);
      current_primary_key_ = primary_key;
      for (uint index = 0; index < table->s->keys; index++) {
        if (index == table->s->primary_key) continue;
        bool unique_form = false;
        entry_key_of(index, record, primary_key, &expected_key, &unique_form);
        entry_value_of(index, record, primary_key, &expected_value);
        uint8_t *stored = nullptr;
        size_t stored_length = 0;
        code = riptide_get_cf(database(), read, family(), bytes(expected_key), expected_key.size(), &stored,
                              &stored_length, &error);
        if (code != RIPTIDE_OK) {
          report(code, error);
          status = HA_ADMIN_FAILED;
          break;
        }
        if (stored == nullptr || stored_length != expected_value.size() ||
            memcmp(stored, expected_value.data(), stored_length) != 0)
          problems++;
        riptide_free(stored);
      }
    }
    if (riptide_iterator_next(iterator, &error) != RIPTIDE_OK) {
      report(RIPTIDE_IO, error);
      status = HA_ADMIN_FAILED;
    }
  }
  if (iterator != nullptr) riptide_iterator_destroy(iterator);
  for (uint index = 0; status == 0 && index < table->s->keys; index++) {
    if (index == table->s->primary_key) continue;
    uint64_t entries = 0;
    if (index_iterator(family(), riptide_sql::index_id(table->s, index), snapshot, &iterator) != 0) {
      status = HA_ADMIN_FAILED;
      break;
    }
    while (riptide_iterator_valid(iterator)) {
      entries++;
      if (riptide_iterator_next(iterator, nullptr) != RIPTIDE_OK) break;
    }
    riptide_iterator_destroy(iterator);
    if (entries != rows) {
      push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_UNKNOWN_ERROR,
                          "RIPTIDE: index %s has %llu entries for %llu rows", table->key_info[index].name.str,
                          static_cast<unsigned long long>(entries), static_cast<unsigned long long>(rows));
      problems++;
    }
  }
  riptide_readoptions_destroy(read);
  riptide_snapshot_release(snapshot);
  table->column_bitmaps_set(old_read_set, old_write_set);
  if (status != 0) return status;
  if (problems > 0) {
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_UNKNOWN_ERROR,
                        "RIPTIDE: %llu rows or index entries are missing or wrong",
                        static_cast<unsigned long long>(problems));
    return HA_ADMIN_CORRUPT;
  }
  return HA_ADMIN_OK;
}
