// See ha_riptide.h: full scans, index reads in both directions, index-only reads, index
// condition pushdown and row positions. Runs on the thread that owns the handler.
//
// Reads go through a transaction iterator over the table's column family, bounded to the
// active index's id; a locking read (UPDATE, DELETE, SELECT ... FOR UPDATE) locks each row's
// primary key with get_for_update (LOCK IN SHARE MODE: get_for_share) and uses the value that
// returns, so under READ COMMITTED it sees the latest committed row and under REPEATABLE READ a
// row changed after the snapshot fails with ER_LOCK_DEADLOCK (first committer wins).
#include <my_global.h>
#include <key.h>
#include <mysqld_error.h>
#include <sql_class.h>

#include <algorithm>
#include <map>

#include "engine.h"
#include "ha_riptide.h"
#include "key_encoding.h"
#include "row_format.h"
#include "transaction.h"

using riptide_sql::counters;
using riptide_sql::database;
using riptide_sql::kPrimaryIndexId;
using riptide_sql::report;

namespace {

const uint8_t *bytes(const std::string &s) { return reinterpret_cast<const uint8_t *>(s.data()); }

// A secondary entry's value: the primary key, then the key images (see entry_value_of).
bool split_entry_value(const uint8_t *value, size_t length, std::string *primary_key, const uint8_t **images) {
  if (length < 2) return false;
  const size_t key_length = (static_cast<size_t>(value[0]) << 8) | value[1];
  if (length < 2 + key_length) return false;
  primary_key->assign(reinterpret_cast<const char *>(value + 2), key_length);
  *images = value + 2 + key_length;
  return true;
}

// Whether `key` sorts bytewise at or after `bound` (never, for an empty bound).
bool at_or_past(const uint8_t *key, size_t length, const std::string &bound) {
  if (bound.empty()) return false;
  const int order = memcmp(key, bound.data(), std::min(length, bound.size()));
  return order > 0 || (order == 0 && length >= bound.size());
}

}  // namespace

void ha_riptide::drop_iterator() {
  // An iterator of an ended transaction is already gone (the C ABI reports MISUSE, harmlessly).
  // Another connection's iterator is left to its transaction's end (see iterator_thd_).
  if (iterator_ != nullptr && iterator_thd_ == current_thd) riptide_iterator_destroy(iterator_);
  iterator_ = nullptr;
  iterator_transaction_ = nullptr;
  iterator_thd_ = nullptr;
  iterator_parked_ = false;
  step_.ready = false;
  reset_read_ahead();
}

void ha_riptide::park_iterator() {
  if (iterator_ != nullptr) iterator_parked_ = true;
}

bool ha_riptide::parked_iterator_reads_as_new() {
  // Same transaction (checked by the caller) and index, a snapshot that does not move, and no
  // write of the transaction since the iterator copied its own writes: a new iterator would
  // read the same entries. Whatever the parked one was positioned on, every scan positions it
  // again. An iterator that met an error is not reused.
  const riptide_sql::Connection *state = riptide_sql::connection(ha_thd());
  return state->iterators_reusable && iterator_generation_ == state->write_generation &&
         riptide_iterator_status(iterator_, nullptr) == RIPTIDE_OK;
}

int ha_riptide::ensure_iterator() {
  step_.ready = false;
  reposition_ = false;
  reset_read_ahead();
  riptide_txn_t *txn = transaction();
  if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
  if (iterator_ != nullptr && iterator_transaction_ == txn && iterator_scan_id_ == scan_id_) {
    if (!iterator_parked_) return 0;
    if (parked_iterator_reads_as_new()) {
      iterator_parked_ = false;
      return 0;
    }
  }
  drop_iterator();
  riptide_error_t *error = nullptr;
  const uint8_t lower = scan_id_;
  const uint8_t upper = static_cast<uint8_t>(scan_id_ + 1);
  riptide_code_t code = RIPTIDE_OK;
  // The read options live as long as the handler; the library copies the bounds, which are
  // set again only for another index.
  if (read_options_ == nullptr) {
    code = riptide_readoptions_create(&read_options_, &error);
    read_options_bounded_ = false;
  }
  if (code == RIPTIDE_OK && (!read_options_bounded_ || read_options_scan_id_ != scan_id_)) {
    read_options_bounded_ = false;
    code = riptide_readoptions_set_lower_bound(read_options_, &lower, 1, &error);
    if (code == RIPTIDE_OK) code = riptide_readoptions_set_upper_bound(read_options_, &upper, 1, &error);
    if (code == RIPTIDE_OK) {
      read_options_bounded_ = true;
      read_options_scan_id_ = scan_id_;
    }
  }
  if (code == RIPTIDE_OK) code = riptide_txn_iterator_create(txn, read_options_, family(), &iterator_, &error);
  if (code != RIPTIDE_OK) {
    iterator_ = nullptr;
    return report(code, error);
  }
  iterator_transaction_ = txn;
  iterator_thd_ = ha_thd();
  iterator_scan_id_ = scan_id_;
  iterator_generation_ = riptide_sql::connection(ha_thd())->write_generation;
  return 0;
}

int ha_riptide::get(const std::string &key, bool lock, std::string *value, bool *found) {
  uint8_t *bytes_out = nullptr;
  size_t length = 0;
  riptide_error_t *error = nullptr;
  riptide_txn_t *txn = transaction();
  if (txn == nullptr) return HA_ERR_INTERNAL_ERROR;
  riptide_code_t code;
  if (!lock)
    code = riptide_txn_get_cf(txn, family(), bytes(key), key.size(), &bytes_out, &length, &error);
  else if (share_rows_)
    code = riptide_txn_get_for_share_cf(txn, family(), bytes(key), key.size(), &bytes_out, &length, &error);
  else
    code = riptide_txn_get_for_update_cf(txn, family(), bytes(key), key.size(), &bytes_out, &length, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  *found = bytes_out != nullptr;
  if (bytes_out != nullptr) {
    value->assign(reinterpret_cast<const char *>(bytes_out), length);
    riptide_free(bytes_out);
  }
  return 0;
}

int ha_riptide::unpack(uchar *buf, const std::string &primary_key, const std::string &row) {
  return unpack(buf, bytes(primary_key), primary_key.size(), bytes(row), row.size());
}

int ha_riptide::unpack(uchar *buf, const uint8_t *primary_key, size_t primary_key_length, const uint8_t *row,
                       size_t row_length) {
  // assign reuses the strings' buffers: no allocation per row once they are large enough.
  current_primary_key_.assign(reinterpret_cast<const char *>(primary_key), primary_key_length);
  // BLOB fields of the record point into the bytes they were unpacked from, which must outlive
  // the iterator's next move: only a table with BLOBs has its row copied first. Other fields
  // are copied into the record, so they unpack straight from the engine's memory.
  const uint8_t *source = row;
  if (table->s->blob_fields > 0) {
    row_bytes_.assign(reinterpret_cast<const char *>(row), row_length);
    source = bytes(row_bytes_);
  }
  // A plain read decodes the columns the statement reads (read_set), as InnoDB and MyRocks
  // do; a locking read (UPDATE, DELETE, REPLACE, ... FOR UPDATE) decodes the whole row, which
  // update_row and delete_row re-encode and index.
  const MY_BITMAP *wanted = lock_rows_ ? nullptr : table->read_set;
  if (row_plan_.table != table) riptide_sql::build_row_plan(table, &row_plan_);
  if (!riptide_sql::unpack_row(row_plan_, table, buf, source, row_length, wanted)) return HA_ERR_CRASHED;
  counters().rows_read.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void ha_riptide::reset_read_ahead() {
  read_ahead_.entries = 0;
  read_ahead_.taken = 0;
  read_ahead_.offset = 0;
  read_ahead_.runs = 0;
  read_ahead_.single_steps = 0;
  read_ahead_.ahead = false;
  read_ahead_.off = false;
  read_ahead_.stop_known = false;
}

int ha_riptide::read_ahead_step() {
  // Single steps of a scan before it reads ahead: a scan that stops after a few rows (LIMIT,
  // EXISTS, a unique range) copies nothing it does not return.
  constexpr unsigned kSingleStepsFirst = 2;
  // Entries per run: a first short run, then longer ones, within a buffer of kBufferBytes.
  constexpr size_t kFirstRunEntries = 16;
  constexpr size_t kRunEntries = 48;
  constexpr size_t kBufferBytes = 16 * 1024;
  ReadAhead &ahead = read_ahead_;
  if (ahead.taken == ahead.entries) {
    if (!ahead.ahead) {
      if (ahead.off || ahead.single_steps < kSingleStepsFirst || lock_rows_ ||
          !riptide_sql::connection(ha_thd())->read_ahead) {
        ahead.single_steps++;
        return -1;
      }
    }
    if (!ahead.stop_known) {
      // The range the server reads ends at end_range (set by read_range_first, cleared by
      // index_init): entries at or past its encoded end are not copied. It is only a limit on
      // copying: an entry the run stops at is still returned singly, and the server compares
      // every row with the range itself, so an end encoded short costs steps, never rows.
      ahead.stop_known = true;
      ahead.stop_key.clear();
      if (inited == INDEX && end_range != nullptr && active_index < MAX_KEY) {
        search_key(active_index, end_range->key, end_range->keypart_map, &ahead.stop_key);
        if (end_range->flag != HA_READ_BEFORE_KEY) ahead.stop_key = riptide_sql::prefix_successor(ahead.stop_key);
      }
    }
    if (ahead.buffer.size() < kBufferBytes) ahead.buffer.resize(kBufferBytes);
    size_t entries = 0;
    size_t used = 0;
    riptide_error_t *error = nullptr;
    const riptide_code_t code = riptide_iterator_next_batch(
        iterator_, ahead.ahead ? 0 : 1, ahead.stop_key.empty() ? nullptr : bytes(ahead.stop_key),
        ahead.stop_key.size(), ahead.runs == 0 ? kFirstRunEntries : kRunEntries, ahead.buffer.data(),
        ahead.buffer.size(), &entries, &used, &error);
    if (code != RIPTIDE_OK) {
      ahead.ahead = false;
      return report(code, error);
    }
    ahead.runs++;
    ahead.entries = entries;
    ahead.taken = 0;
    ahead.offset = 0;
    if (entries == 0) {
      // Nothing copied: the iterator is on the entry to return now (at the range's end, or too
      // large for the buffer) or past the last; read it singly, as a step would have.
      ahead.ahead = false;
      riptide_iterator_current(iterator_, &step_.key, &step_.key_length, &step_.value, &step_.value_length);
      step_.ready = true;
      // An entry before the range's end was too large to copy: this scan goes on in single
      // steps.
      if (step_.key != nullptr && !at_or_past(step_.key, step_.key_length, ahead.stop_key)) ahead.off = true;
      return 0;
    }
    ahead.ahead = true;
  }
  // The next copied entry: two 32-bit little-endian lengths, then the key and the value.
  const uint8_t *entry = ahead.buffer.data() + ahead.offset;
  const size_t key_length = uint4korr(entry);
  const size_t value_length = uint4korr(entry + 4);
  step_.key = entry + 8;
  step_.key_length = key_length;
  step_.value = entry + 8 + key_length;
  step_.value_length = value_length;
  step_.ready = true;
  ahead.offset += 8 + key_length + value_length;
  ahead.taken++;
  return 0;
}

int ha_riptide::move(bool forward) {
  riptide_error_t *error = nullptr;
  // An iterator that is not parked serves the statement that created or took it, so it is the
  // statement's transaction's: no need to look the transaction up per step (0.9 % of
  // mariadbd's CPU in read_only). A statement's end parks or drops it (external_lock), or
  // under LOCK TABLES the next statement's start parks it (start_stmt).
  const bool turning_after_read_ahead = !forward && read_ahead_.ahead;
  if (iterator_ == nullptr || iterator_parked_ || turning_after_read_ahead || reposition_) {
    // The scan goes on in a later statement (HANDLER ... READ NEXT): an iterator of the
    // statement's transaction (the parked one if it still reads as a new one would) starts
    // again from the entry read last. So does a backward step after reading ahead, since the
    // iterator then stands past the entry read last, and a step after a point read, which
    // positioned no iterator.
    reposition_ = false;
    if (position_key_.empty()) return HA_ERR_END_OF_FILE;
    if (turning_after_read_ahead) {
      reset_read_ahead();
      step_.ready = false;
    } else if (int result = ensure_iterator()) {
      return result;
    }
    riptide_code_t code = forward ? riptide_iterator_seek(iterator_, bytes(position_key_), position_key_.size(), &error)
                                  : riptide_iterator_seek_for_prev(iterator_, bytes(position_key_),
                                                                   position_key_.size(), &error);
    const uint8_t *key = nullptr;
    size_t key_length = 0;
    if (code == RIPTIDE_OK && riptide_iterator_current(iterator_, &key, &key_length, nullptr, nullptr) &&
        key_length == position_key_.size() && memcmp(key, position_key_.data(), key_length) == 0)
      code = forward ? riptide_iterator_next(iterator_, &error) : riptide_iterator_prev(iterator_, &error);
    return code == RIPTIDE_OK ? 0 : report(code, error);
  }
  if (forward) {
    const int result = read_ahead_step();
    if (result >= 0) return result;
  }
  // One call steps and reads the entry (one handle lookup in the C ABI instead of two); the
  // read_entry that follows every move takes it from step_.
  const riptide_code_t code =
      forward ? riptide_iterator_next_entry(iterator_, &step_.key, &step_.key_length, &step_.value,
                                            &step_.value_length, &error)
              : riptide_iterator_prev_entry(iterator_, &step_.key, &step_.key_length, &step_.value,
                                            &step_.value_length, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  step_.ready = true;
  return 0;
}

int ha_riptide::read_entry(uchar *buf, bool forward) {
  std::string primary_key;
  std::string value;
  for (;;) {
    const uint8_t *key = nullptr;
    const uint8_t *entry = nullptr;
    size_t key_length = 0;
    size_t value_length = 0;
    // One call for validity, key and value (each C ABI call looks its handle up), unless the
    // move that led here read them already.
    if (step_.ready) {
      step_.ready = false;
      key = step_.key;
      key_length = step_.key_length;
      entry = step_.value;
      value_length = step_.value_length;
    } else {
      riptide_iterator_current(iterator_, &key, &key_length, &entry, &value_length);
    }
    if (key == nullptr) {
      riptide_error_t *error = nullptr;
      const riptide_code_t code = riptide_iterator_status(iterator_, &error);
      return code == RIPTIDE_OK ? HA_ERR_END_OF_FILE : report(code, error);
    }
    if (key == nullptr || key_length == 0 || key[0] != scan_id_) return HA_ERR_END_OF_FILE;
    position_key_.assign(reinterpret_cast<const char *>(key), key_length);
    if (!same_prefix_.empty() &&
        (key_length < same_prefix_.size() || memcmp(key, same_prefix_.data(), same_prefix_.size()) != 0))
      return HA_ERR_END_OF_FILE;
    if (scan_id_ == kPrimaryIndexId) {
      if (!lock_rows_) return unpack(buf, key, key_length, entry, value_length);
      primary_key.assign(reinterpret_cast<const char *>(key), key_length);
      bool found = false;
      if (int result = get(primary_key, true, &value, &found)) return result;
      if (found) return unpack(buf, primary_key, value);
      // Deleted by a transaction that committed while this one waited for the lock.
      if (int result = move(forward)) return result;
      continue;
    }
    const uint8_t *images = nullptr;
    if (!split_entry_value(entry, value_length, &primary_key, &images)) return HA_ERR_CRASHED;
    KEY *key_info = &table->key_info[active_index];
    const bool restore = keyread_enabled() || (pushed_idx_cond != nullptr && pushed_idx_cond_keyno == active_index);
    if (restore) {
      if (images + key_info->key_length > entry + value_length) return HA_ERR_CRASHED;
      key_restore(buf, images, key_info, key_info->key_length);
      if (table->s->primary_key != MAX_KEY) {
        KEY *primary = &table->key_info[table->s->primary_key];
        if (images + key_info->key_length + primary->key_length > entry + value_length) return HA_ERR_CRASHED;
        key_restore(buf, images + key_info->key_length, primary, primary->key_length);
      }
    }
    if (pushed_idx_cond != nullptr && pushed_idx_cond_keyno == active_index) {
      const check_result_t check = handler_index_cond_check(this);
      if (check == CHECK_OUT_OF_RANGE) return HA_ERR_END_OF_FILE;
      if (check == CHECK_ABORTED_BY_USER) return HA_ERR_ABORTED_BY_USER;
      if (check == CHECK_NEG) {
        if (int result = move(forward)) return result;
        continue;
      }
    }
    if (keyread_enabled() && !lock_rows_) {
      current_primary_key_ = primary_key;
      counters().rows_read.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    bool found = false;
    if (int result = get(primary_key, lock_rows_, &value, &found)) return result;
    if (found) {
      if (keyread_enabled()) {
        current_primary_key_ = primary_key;
        counters().rows_read.fetch_add(1, std::memory_order_relaxed);
        return 0;
      }
      return unpack(buf, primary_key, value);
    }
    // The row went away after the iterator saw its entry (a commit in between, visible to
    // READ COMMITTED reads or to the lock): skip it.
    if (int result = move(forward)) return result;
  }
}

int ha_riptide::point_read(uchar *buf, const std::string &key) {
  point_positioned_ = true;
  // No iterator is positioned; a later index_next or index_prev goes on from this key.
  position_key_ = key;
  std::string value;
  bool found = false;
  if (scan_id_ == kPrimaryIndexId) {
    if (int result = get(key, lock_rows_, &value, &found)) return result;
    if (!found) return HA_ERR_KEY_NOT_FOUND;
    return unpack(buf, key, value);
  }
  if (int result = get(key, false, &value, &found)) return result;
  if (!found) return HA_ERR_KEY_NOT_FOUND;
  std::string primary_key;
  const uint8_t *images = nullptr;
  if (!split_entry_value(bytes(value), value.size(), &primary_key, &images)) return HA_ERR_CRASHED;
  std::string row;
  if (int result = get(primary_key, lock_rows_, &row, &found)) return result;
  if (!found) return HA_ERR_KEY_NOT_FOUND;
  // Index-only or not, the whole row is at hand (a superset of the index's columns).
  return unpack(buf, primary_key, row);
}

int ha_riptide::rnd_init(bool) {
  scan_id_ = kPrimaryIndexId;
  same_prefix_.clear();
  position_key_.clear();
  point_positioned_ = false;
  park_iterator();
  // The first rnd_next positions the scan: the server also calls rnd_init before reading a
  // sort's result by row position (rnd_pos), which needs no iterator.
  scan_pending_ = true;
  scan_started_ = false;
  return 0;
}

int ha_riptide::rnd_next(uchar *buf) {
  if (scan_pending_) {
    scan_pending_ = false;
    if (int result = ensure_iterator()) return result;
    riptide_error_t *error = nullptr;
    const riptide_code_t code = riptide_iterator_seek_to_first(iterator_, &error);
    if (code != RIPTIDE_OK) return report(code, error);
  }
  if (iterator_ == nullptr && position_key_.empty()) return HA_ERR_END_OF_FILE;
  if (scan_started_) {
    if (int result = move(true)) return result;
  }
  scan_started_ = true;
  return read_entry(buf, true);
}

int ha_riptide::rnd_end() {
  scan_pending_ = false;
  park_iterator();
  return 0;
}

void ha_riptide::position(const uchar *) {
  // ref: the primary key's length (2 bytes, little-endian), then the key, zero-padded.
  memset(ref, 0, ref_length);
  const size_t length = std::min<size_t>(current_primary_key_.size(), ref_length - 2);
  int2store(ref, static_cast<uint16>(length));
  memcpy(ref + 2, current_primary_key_.data(), length);
}

int ha_riptide::rnd_pos(uchar *buf, uchar *pos) {
  const uint length = uint2korr(pos);
  if (length > ref_length - 2) return HA_ERR_CRASHED;
  const std::string primary_key(reinterpret_cast<const char *>(pos + 2), length);
  std::string value;
  bool found = false;
  if (int result = get(primary_key, lock_rows_, &value, &found)) return result;
  if (!found) return HA_ERR_KEY_NOT_FOUND;
  return unpack(buf, primary_key, value);
}

int ha_riptide::index_init(uint index, bool) {
  active_index = index;
  scan_id_ = riptide_sql::index_id(table->s, index);
  same_prefix_.clear();
  position_key_.clear();
  point_positioned_ = false;
  scan_pending_ = false;
  // The iterator is taken on first use: point reads of a unique key never need one.
  park_iterator();
  return 0;
}

int ha_riptide::index_end() {
  active_index = MAX_KEY;
  same_prefix_.clear();
  park_iterator();
  return 0;
}

Item *ha_riptide::idx_cond_push(uint keyno, Item *idx_cond) {
  pushed_idx_cond = idx_cond;
  pushed_idx_cond_keyno = keyno;
  in_range_check_pushed_down = true;
  return nullptr;
}

int ha_riptide::reset() {
  // The end of a statement's use of the table: forget the pushed condition and row locking.
  cancel_pushed_idx_cond();
  lock_rows_ = false;
  share_rows_ = false;
  return 0;
}

void ha_riptide::search_key(uint index, const uchar *key, key_part_map keypart_map, std::string *out) {
  const uint key_length = calculate_key_len(table, index, key, keypart_map);
  const uint parts = riptide_sql::parts_in_map(keypart_map);
  key_restore(record_, key, &table->key_info[index], key_length);
  out->assign(1, static_cast<char>(riptide_sql::index_id(table->s, index)));
  bool has_null = false;
  riptide_sql::append_key_parts(table, index, record_, parts, out, &has_null);
}

int ha_riptide::index_read_map(uchar *buf, const uchar *key, key_part_map keypart_map,
                               enum ha_rkey_function find_flag) {
  same_prefix_.clear();
  point_positioned_ = false;
  std::string search;
  search_key(active_index, key, keypart_map, &search);
  const KEY *key_info = &table->key_info[active_index];
  const uint parts = riptide_sql::parts_in_map(keypart_map);
  // A whole unique key read exactly is a point read (no iterator); a NULL part can match many
  // rows of a unique secondary index, and those entries carry the primary key.
  if (find_flag == HA_READ_KEY_EXACT && parts >= key_info->user_defined_key_parts &&
      (active_index == table->s->primary_key || (key_info->flags & HA_NOSAME))) {
    bool has_null = false;
    // Look for NULL parts in the record the key was restored into.
    for (uint i = 0; i < key_info->user_defined_key_parts; i++) {
      Field *field = key_info->key_part[i].field;
      if (field->real_maybe_null() && field->is_real_null(record_ - table->record[0])) has_null = true;
    }
    if (!has_null) {
      same_prefix_ = search;
      return point_read(buf, search);
    }
  }
  if (int result = ensure_iterator()) return result;
  const std::string after = riptide_sql::prefix_successor(search);
  riptide_error_t *error = nullptr;
  riptide_code_t code = RIPTIDE_OK;
  bool forward = true;
  // Positions on the last entry before `target` (the end of the index when there is none).
  auto seek_before = [&](const std::string &target) {
    riptide_code_t result = RIPTIDE_OK;
    if (!target.empty()) result = riptide_iterator_seek(iterator_, bytes(target), target.size(), &error);
    if (result != RIPTIDE_OK) return result;
    if (!target.empty() && riptide_iterator_valid(iterator_)) return riptide_iterator_prev(iterator_, &error);
    return riptide_iterator_seek_to_last(iterator_, &error);
  };
  switch (find_flag) {
    case HA_READ_KEY_EXACT:
    case HA_READ_PREFIX:
      same_prefix_ = search;
      code = riptide_iterator_seek(iterator_, bytes(search), search.size(), &error);
      break;
    case HA_READ_KEY_OR_NEXT:
      code = riptide_iterator_seek(iterator_, bytes(search), search.size(), &error);
      break;
    case HA_READ_AFTER_KEY:
      if (after.empty()) {
        code = riptide_iterator_seek_to_last(iterator_, &error);
        if (code == RIPTIDE_OK && riptide_iterator_valid(iterator_)) code = riptide_iterator_next(iterator_, &error);
      } else {
        code = riptide_iterator_seek(iterator_, bytes(after), after.size(), &error);
      }
      break;
    case HA_READ_BEFORE_KEY:
      forward = false;
      code = seek_before(search);
      break;
    case HA_READ_KEY_OR_PREV:
    case HA_READ_PREFIX_LAST_OR_PREV:
      forward = false;
      code = seek_before(after);
      break;
    case HA_READ_PREFIX_LAST:
      forward = false;
      same_prefix_ = search;
      code = seek_before(after);
      break;
    default:
      return HA_ERR_UNSUPPORTED;
  }
  if (code != RIPTIDE_OK) return report(code, error);
  const int result = read_entry(buf, forward);
  return result == HA_ERR_END_OF_FILE ? HA_ERR_KEY_NOT_FOUND : result;
}

int ha_riptide::index_read_last_map(uchar *buf, const uchar *key, key_part_map keypart_map) {
  return index_read_map(buf, key, keypart_map, HA_READ_PREFIX_LAST);
}

int ha_riptide::index_next(uchar *buf) {
  // Not bound to the key an exact read looked for (index_next_same is), as in InnoDB: HANDLER
  // ... READ idx = (x) then READ idx NEXT goes on past x's rows.
  same_prefix_.clear();
  return step(buf, true);
}

int ha_riptide::index_prev(uchar *buf) {
  same_prefix_.clear();
  return step(buf, false);
}

int ha_riptide::index_next_same(uchar *buf, const uchar *, uint) {
  // A whole unique key has one row; otherwise same_prefix_ (set by the exact read) ends the
  // scan where the key changes.
  if (point_positioned_) return HA_ERR_END_OF_FILE;
  return step(buf, true);
}

int ha_riptide::step(uchar *buf, bool forward) {
  if (point_positioned_) {
    // A point read positioned no iterator: the scan goes on from the key it looked up.
    point_positioned_ = false;
    reposition_ = true;
  }
  if (iterator_ == nullptr && position_key_.empty()) return HA_ERR_END_OF_FILE;
  if (int result = move(forward)) return result;
  return read_entry(buf, forward);
}

int ha_riptide::index_first(uchar *buf) {
  same_prefix_.clear();
  point_positioned_ = false;
  if (int result = ensure_iterator()) return result;
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_iterator_seek_to_first(iterator_, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  return read_entry(buf, true);
}

int ha_riptide::index_last(uchar *buf) {
  same_prefix_.clear();
  point_positioned_ = false;
  if (int result = ensure_iterator()) return result;
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_iterator_seek_to_last(iterator_, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  return read_entry(buf, false);
}
