// See dictionary.h; the bytes are in docs/sql/storage.md.
#include "dictionary.h"

#include <log.h>
#include <mysqld_error.h>
#include <sql_class.h>

#include <chrono>

#include "engine.h"
#include "key_encoding.h"
#include "row_format.h"

namespace riptide_sql {

const std::string kDictionaryKey("\xFF" "D", 2);
const std::string kAutoIncrementKey("\xFF" "A", 2);
const std::string kStatisticsKey("\xFF" "C", 2);

namespace {

void put_u16(std::string *out, uint v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

void put_u64(std::string *out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t get_u64(const uint8_t *bytes) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | bytes[i];
  return v;
}

// A synced plain write of one metadata record (outside transactions: no transaction ever
// locks these keys, see the file comment of dictionary.h).
int put_meta(riptide_cf_t *family, const std::string &key, const std::string &value, bool sync) {
  riptide_writeoptions_t *options = nullptr;
  riptide_error_t *error = nullptr;
  riptide_code_t code = riptide_writeoptions_create(&options, &error);
  if (code == RIPTIDE_OK) code = riptide_writeoptions_set_sync(options, sync ? 1 : 0, &error);
  if (code == RIPTIDE_OK)
    code = riptide_put_cf(database(), options, family, reinterpret_cast<const uint8_t *>(key.data()), key.size(),
                          reinterpret_cast<const uint8_t *>(value.data()), value.size(), &error);
  if (options != nullptr) riptide_writeoptions_destroy(options);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

// Reads a metadata record; `*found` is false when it is absent.
int get_meta(riptide_cf_t *family, const std::string &key, std::string *value, bool *found) {
  uint8_t *bytes = nullptr;
  size_t length = 0;
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_get_cf(database(), nullptr, family, reinterpret_cast<const uint8_t *>(key.data()),
                                             key.size(), &bytes, &length, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  *found = bytes != nullptr;
  if (bytes != nullptr) {
    value->assign(reinterpret_cast<const char *>(bytes), length);
    riptide_free(bytes);
  }
  return 0;
}

int family_handle(const char *path, riptide_cf_t **out) {
  riptide_error_t *error = nullptr;
  const std::string name = table_family_name(path);
  const riptide_code_t code = riptide_column_family_handle(database(), name.c_str(), out, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  return *out == nullptr ? HA_ERR_NO_SUCH_TABLE : 0;
}

uint64_t now_us() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

std::string table_family_name(const char *path) {
  std::string name(path);
  // The server's paths are "./db/table": the family is named "db/table".
  if (name.compare(0, 2, "./") == 0) name.erase(0, 2);
  return name;
}

std::string dictionary_record(const TABLE *table) {
  // version, key format, row format, hidden-primary flag, index count, then per index:
  // id, flags (1 unique), part count, per part: field number (2 bytes), length (2), flags
  // (1 DESC).
  std::string out;
  out.push_back(static_cast<char>(kDictionaryVersion));
  out.push_back(static_cast<char>(kKeyFormatVersion));
  out.push_back(static_cast<char>(kRowFormatVersion));
  out.push_back(static_cast<char>(table->s->primary_key == MAX_KEY ? 1 : 0));
  out.push_back(static_cast<char>(table->s->keys));
  for (uint index = 0; index < table->s->keys; index++) {
    const KEY *key = &table->key_info[index];
    out.push_back(static_cast<char>(index_id(table->s, index)));
    out.push_back(static_cast<char>((key->flags & HA_NOSAME) ? 1 : 0));
    out.push_back(static_cast<char>(key->user_defined_key_parts));
    for (uint i = 0; i < key->user_defined_key_parts; i++) {
      const KEY_PART_INFO *part = &key->key_part[i];
      put_u16(&out, part->field->field_index);
      put_u16(&out, part->length);
      out.push_back(static_cast<char>((part->key_part_flag & HA_REVERSE_SORT) ? 1 : 0));
    }
  }
  return out;
}

int create_table_family(const char *path, const TABLE *table, uint64_t auto_increment) {
  const std::string name = table_family_name(path);
  riptide_error_t *error = nullptr;
  riptide_cf_t *family = nullptr;
  riptide_code_t code = riptide_column_family_handle(database(), name.c_str(), &family, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  if (family != nullptr) {
    sql_print_warning("RIPTIDE: dropping column family %s left without a table (a crashed CREATE)", name.c_str());
    code = riptide_drop_column_family(database(), family, &error);
    riptide_cf_destroy(family);
    family = nullptr;
    if (code != RIPTIDE_OK) return report(code, error);
  }
  code = create_family(name.c_str(), &family, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  int result = 0;
  if (auto_increment > 1) {
    std::string value;
    put_u64(&value, auto_increment);
    result = put_meta(family, kAutoIncrementKey, value, false);
  }
  // The dictionary record is synced: it also makes the column family's creation durable
  // before the server writes the .frm.
  if (result == 0) result = put_meta(family, kDictionaryKey, dictionary_record(table), true);
  riptide_cf_destroy(family);
  return result;
}

int drop_table_family(const char *path) {
  riptide_cf_t *family = nullptr;
  riptide_error_t *error = nullptr;
  const std::string name = table_family_name(path);
  riptide_code_t code = riptide_column_family_handle(database(), name.c_str(), &family, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  if (family == nullptr) return ENOENT;
  code = riptide_drop_column_family(database(), family, &error);
  riptide_cf_destroy(family);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

int rename_table_family(const char *from, const char *to) {
  riptide_cf_t *family = nullptr;
  if (int result = family_handle(from, &family)) return result;
  riptide_error_t *error = nullptr;
  const std::string new_name = table_family_name(to);
  const riptide_code_t code = riptide_rename_column_family(database(), family, new_name.c_str(), &error);
  riptide_cf_destroy(family);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

TableShare::TableShare() { thr_lock_init(&lock); }

TableShare::~TableShare() {
  thr_lock_delete(&lock);
  if (family != nullptr) riptide_cf_destroy(family);
}

int TableShare::load(TABLE *table, const char *opened_path) {
  path = opened_path;
  if (int result = family_handle(path.c_str(), &family)) return result;
  std::string stored;
  bool found = false;
  if (int result = get_meta(family, kDictionaryKey, &stored, &found)) return result;
  const std::string expected = dictionary_record(table);
  if (!found) {
    // A CREATE that crashed between the column family and its record, or a table created by
    // an earlier layout: the record describes the .frm, which the server just read.
    if (int result = put_meta(family, kDictionaryKey, expected, true)) return result;
  } else if (stored != expected) {
    sql_print_error("RIPTIDE: the data dictionary of %s does not match its .frm (dictionary version %u)",
                    path.c_str(), stored.empty() ? 0u : static_cast<uchar>(stored[0]));
    my_printf_error(ER_UNKNOWN_ERROR, "RIPTIDE: the data dictionary of %s does not match its .frm", MYF(0),
                    path.c_str());
    return HA_ERR_TABLE_DEF_CHANGED;
  }
  if (int result = load_counters(table)) return result;
  // The row estimate first: stored statistics count as fresh for the table's present size.
  refresh_statistics(true);
  load_rows_per_key(table);
  return 0;
}

int TableShare::load_counters(TABLE *table) {
  std::string value;
  bool found = false;
  if (int result = get_meta(family, kAutoIncrementKey, &value, &found)) return result;
  next_auto_increment = found && value.size() == 8 ? get_u64(reinterpret_cast<const uint8_t *>(value.data())) : 1;
  persisted_auto_increment_ = next_auto_increment;
  if (table->s->primary_key != MAX_KEY) return 0;
  // Hidden row ids continue after the largest stored: the last key of the primary index.
  riptide_iterator_t *last = nullptr;
  riptide_error_t *error = nullptr;
  riptide_code_t code = riptide_iterator_create_cf(database(), nullptr, family, &last, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  const uint8_t after_rows = kPrimaryIndexId + 1;
  code = riptide_iterator_seek_for_prev(last, &after_rows, 1, &error);
  if (code == RIPTIDE_OK && riptide_iterator_valid(last)) {
    size_t length = 0;
    const uint8_t *key = riptide_iterator_key(last, &length);
    if (key != nullptr && length == 9 && key[0] == kPrimaryIndexId) next_row_id = get_u64(key + 1) + 1;
  }
  riptide_iterator_destroy(last);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

void TableShare::load_rows_per_key(TABLE *table) {
  std::string value;
  bool found = false;
  if (get_meta(family, kStatisticsKey, &value, &found) != 0 || !found) return;
  // Per index in key order: part count (1 byte), then 8 bytes per part.
  std::vector<std::vector<uint64_t>> loaded(table->s->keys);
  size_t at = 0;
  for (uint index = 0; index < table->s->keys; index++) {
    if (at >= value.size()) return;
    const uint parts = static_cast<uchar>(value[at++]);
    if (parts != table->key_info[index].user_defined_key_parts || at + 8 * parts > value.size()) return;
    for (uint i = 0; i < parts; i++, at += 8)
      loaded[index].push_back(get_u64(reinterpret_cast<const uint8_t *>(value.data()) + at));
  }
  std::lock_guard<std::mutex> guard(stats_mutex);
  rows_per_key = std::move(loaded);
  // Considered fresh for the size the table has now (ANALYZE measured it at some size).
  rows_at_estimate = rows;
  estimate_time_us = now_us();
}

int TableShare::save_rows_per_key(const std::vector<std::vector<uint64_t>> &values, bool persist) {
  std::string value;
  for (const auto &index : values) {
    value.push_back(static_cast<char>(index.size()));
    for (uint64_t v : index) put_u64(&value, v);
  }
  {
    std::lock_guard<std::mutex> guard(stats_mutex);
    rows_per_key = values;
    rows_at_estimate = rows;
    estimate_time_us = now_us();
  }
  return persist ? put_meta(family, kStatisticsKey, value, false) : 0;
}

bool TableShare::rows_per_key_stale() {
  std::lock_guard<std::mutex> guard(stats_mutex);
  if (rows == 0) return false;
  const uint64_t now = now_us();
  if (estimate_time_us != 0 && now - estimate_time_us < 10000000) return false;
  const bool stale = rows_per_key.empty() || rows > 2 * rows_at_estimate || 2 * rows < rows_at_estimate;
  // Claimed now, so concurrent handlers do not all sample at once.
  if (stale) estimate_time_us = now;
  return stale;
}

int TableShare::raise_auto_increment(uint64_t next) {
  uint64_t current = next_auto_increment.load();
  while (current < next) {
    if (next_auto_increment.compare_exchange_weak(current, next)) return persist_auto_increment(next);
  }
  return 0;
}

int TableShare::persist_auto_increment(uint64_t next, bool always) {
  // Written to the WAL before any row that uses a value below `next` commits (the row's commit
  // comes later in the log), so recovery never hands out a value a committed row has. Not
  // synced: the row's own synced commit syncs it too.
  std::lock_guard<std::mutex> guard(auto_increment_mutex_);
  if (!always && next <= persisted_auto_increment_) return 0;
  persisted_auto_increment_ = next;
  std::string value;
  put_u64(&value, next);
  return put_meta(family, kAutoIncrementKey, value, false);
}

void TableShare::refresh_statistics(bool force) {
  const uint64_t now = now_us();
  {
    std::lock_guard<std::mutex> guard(stats_mutex);
    if (!force && stats_time_us != 0 && now - stats_time_us < 1000000) return;
    stats_time_us = now;
  }
  riptide_range_stats_t range;
  memset(&range, 0, sizeof(range));
  range.struct_size = sizeof(range);
  const uint8_t start = kPrimaryIndexId;
  const uint8_t end = kPrimaryIndexId + 1;
  if (riptide_approximate_range_stats(database(), family, &start, 1, &end, 1, &range, nullptr) != RIPTIDE_OK) return;
  std::lock_guard<std::mutex> guard(stats_mutex);
  rows = range.entries;
  data_bytes = range.table_bytes;
}

int TableShare::recreate(TABLE *table) {
  // The rows go with the column family (no per-row deletes): drop it and create it again
  // under the same name. The server holds an exclusive metadata lock on the table.
  riptide_error_t *error = nullptr;
  riptide_code_t code = riptide_drop_column_family(database(), family, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  riptide_cf_destroy(family);
  family = nullptr;
  const std::string name = table_family_name(path.c_str());
  code = create_family(name.c_str(), &family, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  next_row_id = 1;
  next_auto_increment = 1;
  {
    std::lock_guard<std::mutex> guard(auto_increment_mutex_);
    persisted_auto_increment_ = 1;
  }
  {
    std::lock_guard<std::mutex> guard(stats_mutex);
    rows = 0;
    data_bytes = 0;
    stats_time_us = 0;
    rows_per_key.clear();
  }
  return put_meta(family, kDictionaryKey, dictionary_record(table), true);
}

}  // namespace riptide_sql
