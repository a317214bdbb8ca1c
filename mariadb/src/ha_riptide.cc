// See ha_riptide.h: DDL, statement locks and writes. Storage layout: docs/sql/storage.md.
// Runs on the thread that owns the handler.
#include "ha_riptide.h"

#include <key.h>
#include <mysqld_error.h>
#include <sql_class.h>

#include "engine.h"
#include "key_encoding.h"
#include "row_format.h"
#include "transaction.h"

using riptide_sql::counters;
using riptide_sql::database;
using riptide_sql::report;

const char *ha_riptide_extensions[] = {NullS};

namespace {

constexpr size_t kRowIdBytes = 8;

void encode_row_id(uint64_t id, std::string *out) {
  out->assign(1, static_cast<char>(riptide_sql::kPrimaryIndexId));
  for (size_t i = 0; i < kRowIdBytes; i++) out->push_back(static_cast<char>(id >> (8 * (kRowIdBytes - 1 - i))));
}

const uint8_t *bytes(const std::string &s) { return reinterpret_cast<const uint8_t *>(s.data()); }

}  // namespace

ha_riptide::ha_riptide(handlerton *hton, TABLE_SHARE *table_share) : handler(hton, table_share) {
  ref_length = 2 + primary_key_max_bytes_;
}

ha_riptide::~ha_riptide() {
  drop_iterator();
  if (read_options_ != nullptr) riptide_readoptions_destroy(read_options_);
  my_free(record_);
}

ulonglong ha_riptide::table_flags() const {
  // No HA_PARTIAL_COLUMN_READ: the rows of a statement that changes them are read whole
  // (locking reads decode every column), so update_row and delete_row get every indexed column
  // of the old row and the server may compare old and new records in full. Plain reads decode
  // only the columns in read_set plus every indexed one (unpack in ha_riptide_read.cc), which
  // the server reads nothing beyond.
  return HA_REC_NOT_IN_SEQ | HA_NULL_IN_KEY | HA_CAN_BIT_FIELD | HA_BINLOG_ROW_CAPABLE | HA_BINLOG_STMT_CAPABLE |
         HA_PRIMARY_KEY_IN_READ_INDEX | HA_PRIMARY_KEY_REQUIRED_FOR_POSITION | HA_TABLE_SCAN_ON_INDEX |
         HA_CAN_INDEX_BLOBS | HA_CAN_SQL_HANDLER | HA_REQUIRES_KEY_COLUMNS_FOR_DELETE |
         HA_PRIMARY_KEY_REQUIRED_FOR_DELETE |
         HA_ONLINE_ANALYZE | HA_CAN_GEOMETRY | HA_CAN_VIRTUAL_COLUMNS;
}

ulong ha_riptide::index_flags(uint index, uint, bool) const {
  ulong flags = HA_READ_NEXT | HA_READ_PREV | HA_READ_ORDER | HA_READ_RANGE | HA_KEYREAD_ONLY;
  // Secondary entries carry their key image, so a pushed index condition is checked before the
  // row is fetched; primary entries are the row itself.
  if (index != table_share->primary_key) flags |= HA_DO_INDEX_COND_PUSHDOWN;
  // Rows live in the primary index (as InnoDB's): a primary key range reads just its rows.
  if (index == table_share->primary_key) flags |= HA_CLUSTERED_INDEX;
  return flags;
}

int ha_riptide::create(const char *name, TABLE *form, HA_CREATE_INFO *info) {
  for (uint index = 0; index < form->s->keys; index++) {
    std::string why;
    if (!riptide_sql::index_is_supported(form, index, &why)) {
      my_printf_error(ER_UNKNOWN_ERROR, "RIPTIDE: %s", MYF(0), why.c_str());
      return HA_ERR_UNSUPPORTED;
    }
  }
  return riptide_sql::create_table_family(name, form, info->auto_increment_value);
}

int ha_riptide::delete_table(const char *name) { return riptide_sql::drop_table_family(name); }

int ha_riptide::rename_table(const char *from, const char *to) { return riptide_sql::rename_table_family(from, to); }

int ha_riptide::open(const char *name, int, uint) {
  lock_shared_ha_data();
  share_ = static_cast<riptide_sql::TableShare *>(get_ha_share_ptr());
  int result = 0;
  if (share_ == nullptr) {
    auto *share = new riptide_sql::TableShare();
    result = share->load(table, name);
    if (result == 0) {
      set_ha_share_ptr(share);
      share_ = share;
    } else {
      delete share;
    }
  }
  unlock_shared_ha_data();
  if (result != 0) return result;
  thr_lock_data_init(&share_->lock, &lock_data_, nullptr);
  record_ = static_cast<uchar *>(my_malloc(PSI_NOT_INSTRUMENTED, table_share->reclength, MYF(MY_WME)));
  if (record_ == nullptr) return HA_ERR_OUT_OF_MEM;
  memcpy(record_, table_share->default_values, table_share->reclength);
  // ref holds a primary key: its length in 2 bytes, then the key.
  primary_key_max_bytes_ = 1 + kRowIdBytes;
  if (table_share->primary_key != MAX_KEY) {
    const KEY *key = &table->key_info[table_share->primary_key];
    primary_key_max_bytes_ = 1 + riptide_sql::key_width(key, key->user_defined_key_parts);
  }
  ref_length = 2 + primary_key_max_bytes_;
  info(HA_STATUS_VARIABLE | HA_STATUS_CONST);
  return 0;
}

int ha_riptide::close() {
  drop_iterator();
  return 0;
}

int ha_riptide::delete_all_rows() {
  // DELETE without WHERE inside a transaction must stay transactional: the server then deletes
  // row by row (HA_ERR_WRONG_COMMAND). Outside one (and for TRUNCATE) the family is dropped.
  return HA_ERR_WRONG_COMMAND;
}

int ha_riptide::truncate() {
  drop_iterator();
  return share_->recreate(table);
}

void ha_riptide::update_create_info(HA_CREATE_INFO *info) {
  if (!(info->used_fields & HA_CREATE_USED_AUTO)) info->auto_increment_value = share_->next_auto_increment;
}

int ha_riptide::external_lock(THD *thd, int lock_type) {
  // Statement start (a lock) begins or joins the connection's transaction; the end (F_UNLCK)
  // leaves the decision to the server's commit or rollback.
  if (lock_type == F_UNLCK) {
    // Inside a multi-statement transaction the iterator may serve the next statement's scan of
    // the same index; an autocommit statement's transaction ends now, and its iterators with it.
    if (riptide_sql::connection(thd)->iterators_reusable && thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN))
      park_iterator();
    else
      drop_iterator();
    return 0;
  }
  return riptide_sql::begin_statement(thd, lock_rows_, lock_type == F_WRLCK);
}

int ha_riptide::start_stmt(THD *thd, thr_lock_type lock_type) {
  // Under LOCK TABLES a statement starts here instead of in external_lock, and the previous
  // one ended without an F_UNLCK: its iterator is parked, so that the next scan checks it
  // against this statement's transaction before using it.
  park_iterator();
  return riptide_sql::begin_statement(thd, lock_rows_, lock_type >= TL_WRITE_ALLOW_WRITE);
}

THR_LOCK_DATA **ha_riptide::store_lock(THD *thd, THR_LOCK_DATA **to, enum thr_lock_type lock_type) {
  if (lock_type != TL_IGNORE) {
    // Reads lock the rows they return in statements that write the table, and in SELECT ...
    // FOR UPDATE (exclusive locks) / LOCK IN SHARE MODE (shared locks, which other sharers
    // may hold too).
    lock_rows_ = lock_type == TL_READ_WITH_SHARED_LOCKS || lock_type >= TL_WRITE_ALLOW_WRITE;
    share_rows_ = lock_type == TL_READ_WITH_SHARED_LOCKS;
    const enum_sql_command command = static_cast<enum_sql_command>(thd_sql_command(thd));
    if (command == SQLCOM_INSERT_SELECT && lock_type < TL_WRITE_ALLOW_WRITE) lock_rows_ = share_rows_ = false;
  }
  if (lock_type != TL_IGNORE && lock_data_.type == TL_UNLOCK) {
    // Rows are locked by the engine: let writers of one table run together, as InnoDB does.
    if (lock_type >= TL_WRITE_CONCURRENT_INSERT && lock_type <= TL_WRITE && !thd_in_lock_tables(thd) &&
        !thd_tablespace_op(thd))
      lock_type = TL_WRITE_ALLOW_WRITE;
    if (lock_type == TL_READ_NO_INSERT && !thd_in_lock_tables(thd)) lock_type = TL_READ;
    lock_data_.type = lock_type;
  }
  *to++ = &lock_data_;
  return to;
}

riptide_txn_t *ha_riptide::transaction() { return riptide_sql::connection(ha_thd())->transaction; }

void ha_riptide::primary_key_of(const uchar *record, std::string *out) {
  if (table->s->primary_key == MAX_KEY) {
    *out = current_primary_key_;
    return;
  }
  out->assign(1, static_cast<char>(riptide_sql::kPrimaryIndexId));
  bool has_null = false;
  riptide_sql::append_key_parts(table, table->s->primary_key, record,
                                table->key_info[table->s->primary_key].user_defined_key_parts, out, &has_null);
}

void ha_riptide::entry_key_of(uint index, const uchar *record, const std::string &primary_key, std::string *out,
                              bool *unique_form) {
  out->assign(1, static_cast<char>(riptide_sql::index_id(table->s, index)));
  bool has_null = false;
  const KEY *key = &table->key_info[index];
  riptide_sql::append_key_parts(table, index, record, key->user_defined_key_parts, out, &has_null);
  // NULLs never conflict (SQL's rule), so an entry with a NULL is made distinct by its row.
  *unique_form = (key->flags & HA_NOSAME) && !has_null;
  if (!*unique_form) out->append(primary_key);
}

void ha_riptide::entry_value_of(uint index, const uchar *record, const std::string &primary_key, std::string *out) {
  out->clear();
  out->push_back(static_cast<char>(primary_key.size() >> 8));
  out->push_back(static_cast<char>(primary_key.size()));
  out->append(primary_key);
  // Note: Field_bit::get_key_image reads its uneven bits from record[0] whatever record it is
  // given; callers that compare images of another record (update_row) only use them to skip
  // writes whose entry key is unchanged, which a BIT value change always changes.
  KEY *key = &table->key_info[index];
  size_t at = out->size();
  out->resize(at + key->key_length);
  key_copy(reinterpret_cast<uchar *>(&(*out)[at]), record, key, key->key_length);
  if (table->s->primary_key != MAX_KEY) {
    KEY *primary = &table->key_info[table->s->primary_key];
    at = out->size();
    out->resize(at + primary->key_length);
    key_copy(reinterpret_cast<uchar *>(&(*out)[at]), record, primary, primary->key_length);
  }
}

int ha_riptide::check_unique(uint index, const std::string &key) {
  uint8_t *value = nullptr;
  size_t value_length = 0;
  riptide_error_t *error = nullptr;
  // get_for_update locks the key whether or not it exists: a concurrent insert of the same
  // value waits for this transaction and then finds the key.
  riptide_code_t code =
      riptide_txn_get_for_update_cf(transaction(), family(), bytes(key), key.size(), &value, &value_length, &error);
  if (code == RIPTIDE_CONFLICT) {
    // Under snapshot isolation the key was written by a transaction that committed after this
    // one's snapshot. If it exists now, this is a duplicate, as InnoDB reports it.
    riptide_error_t *read_error = nullptr;
    const riptide_code_t read = riptide_get_cf(database(), nullptr, family(), bytes(key), key.size(), &value,
                                               &value_length, &read_error);
    if (read_error != nullptr) riptide_error_free(read_error);
    if (read == RIPTIDE_OK && value != nullptr) {
      riptide_error_free(error);
      code = RIPTIDE_OK;
    }
  }
  if (code != RIPTIDE_OK) return report(code, error);
  if (value != nullptr) {
    riptide_free(value);
    errkey = duplicate_key_ = index;
    return HA_ERR_FOUND_DUPP_KEY;
  }
  return 0;
}

int ha_riptide::put(const std::string &key, const std::string &value) {
  riptide_sql::Connection *state = riptide_sql::connection(ha_thd());
  // Iterators created before this write do not read it (see ensure_iterator).
  state->write_generation++;
  riptide_error_t *error = nullptr;
  const riptide_code_t code =
      riptide_txn_put_cf(state->transaction, family(), bytes(key), key.size(), bytes(value), value.size(), &error);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

int ha_riptide::remove(const std::string &key) {
  riptide_sql::Connection *state = riptide_sql::connection(ha_thd());
  state->write_generation++;
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_txn_delete_cf(state->transaction, family(), bytes(key), key.size(), &error);
  return code == RIPTIDE_OK ? 0 : report(code, error);
}

int ha_riptide::write_row(const uchar *buf) {
  if (transaction() == nullptr) return HA_ERR_INTERNAL_ERROR;
  if (table->next_number_field && buf == table->record[0]) {
    if (int result = update_auto_increment()) return result;
    // An explicit value at or above the counter moves the counter past it.
    if (int result = raise_auto_increment_past(table->next_number_field)) return result;
  }
  std::string primary_key;
  if (table->s->primary_key == MAX_KEY) {
    encode_row_id(share_->next_row_id.fetch_add(1), &primary_key);
  } else {
    primary_key_of(buf, &primary_key);
    if (int result = check_unique(table->s->primary_key, primary_key)) return result;
  }
  for (uint index = 0; index < table->s->keys; index++) {
    if (index == table->s->primary_key) continue;
    bool unique_form = false;
    entry_key_of(index, buf, primary_key, &key_buffer_, &unique_form);
    if (unique_form) {
      if (int result = check_unique(index, key_buffer_)) return result;
    }
    entry_value_of(index, buf, primary_key, &value_buffer_);
    if (int result = put(key_buffer_, value_buffer_)) return result;
  }
  riptide_sql::pack_row(table, buf, &packed_);
  if (int result = put(primary_key, packed_)) return result;
  counters().rows_inserted.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

const uchar *ha_riptide::full_row(const uchar *buf) {
  // A row read index-only holds only its index's columns: read the stored row for the others.
  if (!keyread_enabled()) return buf;
  std::string value;
  bool found = false;
  if (get(current_primary_key_, false, &value, &found) != 0 || !found) return buf;
  row_bytes_ = value;
  if (!riptide_sql::unpack_row(table, record_, bytes(row_bytes_), row_bytes_.size())) return buf;
  return record_;
}

int ha_riptide::update_row(const uchar *old_data, const uchar *new_data) {
  if (transaction() == nullptr) return HA_ERR_INTERNAL_ERROR;
  old_data = full_row(old_data);
  std::string old_key;
  std::string new_key;
  primary_key_of(old_data, &old_key);
  primary_key_of(new_data, &new_key);
  if (table->next_number_field) {
    if (int result = raise_auto_increment_past(table->next_number_field)) return result;
  }
  const bool primary_changed = new_key != old_key;
  if (primary_changed) {
    if (int result = check_unique(table->s->primary_key, new_key)) return result;
  }
  // Secondary entries change only where their key (or the row's primary key) changed.
  std::string old_entry;
  for (uint index = 0; index < table->s->keys; index++) {
    if (index == table->s->primary_key) continue;
    bool old_unique = false;
    bool new_unique = false;
    entry_key_of(index, old_data, old_key, &old_entry, &old_unique);
    entry_key_of(index, new_data, new_key, &key_buffer_, &new_unique);
    entry_value_of(index, new_data, new_key, &value_buffer_);
    if (old_entry == key_buffer_ && !primary_changed) {
      // Same key: only a changed key image (a case change under a case-insensitive
      // collation, say) needs a write.
      std::string old_value;
      entry_value_of(index, old_data, old_key, &old_value);
      if (old_value != value_buffer_) {
        if (int result = put(key_buffer_, value_buffer_)) return result;
      }
      continue;
    }
    if (int result = remove(old_entry)) return result;
    if (new_unique && old_entry != key_buffer_) {
      if (int result = check_unique(index, key_buffer_)) return result;
    }
    if (int result = put(key_buffer_, value_buffer_)) return result;
  }
  if (primary_changed) {
    if (int result = remove(old_key)) return result;
  }
  riptide_sql::pack_row(table, new_data, &packed_);
  if (int result = put(new_key, packed_)) return result;
  current_primary_key_ = new_key;
  counters().rows_updated.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int ha_riptide::delete_row(const uchar *buf) {
  if (transaction() == nullptr) return HA_ERR_INTERNAL_ERROR;
  buf = full_row(buf);
  std::string primary_key;
  primary_key_of(buf, &primary_key);
  for (uint index = 0; index < table->s->keys; index++) {
    if (index == table->s->primary_key) continue;
    bool unique_form = false;
    entry_key_of(index, buf, primary_key, &key_buffer_, &unique_form);
    if (int result = remove(key_buffer_)) return result;
  }
  if (int result = remove(primary_key)) return result;
  counters().rows_deleted.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

int ha_riptide::raise_auto_increment_past(Field *field) {
  if (field->is_null()) return 0;
  const longlong value = field->val_int();
  if (!(field->flags & UNSIGNED_FLAG) && value <= 0) return 0;
  const ulonglong next = static_cast<ulonglong>(value) + 1;
  if (next == 0) return 0;  // The largest unsigned value: no next value.
  return share_->raise_auto_increment(next);
}

void ha_riptide::get_auto_increment(ulonglong offset, ulonglong increment, ulonglong nb_desired_values,
                                    ulonglong *first_value, ulonglong *nb_reserved_values) {
  // Values are handed out from the share's atomic counter, so concurrent inserts never get
  // the same one; the new high-water mark is persisted before any of them is used.
  if (nb_desired_values == 0) nb_desired_values = 1;
  if (increment == 0) increment = 1;
  const ulonglong max_value = table->next_number_field->get_max_int_value();
  uint64_t current = share_->next_auto_increment.load();
  ulonglong first = 0;
  ulonglong next = 0;
  for (;;) {
    first = current;
    // The server's rule: the first v >= current with v = offset + k * increment.
    if (increment > 1 || offset > 1) {
      const ulonglong base = offset > 0 ? offset : 1;
      first = first <= base ? base : base + ((first - base + increment - 1) / increment) * increment;
    }
    if (first > max_value || first == 0) {
      // Exhausted: a value past the column's range makes the server report "Out of range
      // value" (HA_ERR_AUTOINC_ERANGE), as InnoDB does; ~0 (a wrapped counter) is a read
      // failure.
      *first_value = first == 0 ? ~static_cast<ulonglong>(0) : first;
      *nb_reserved_values = 1;
      return;
    }
    const ulonglong room = (max_value - first) / increment + 1;
    if (nb_desired_values > room) nb_desired_values = room;
    // The counter stops just past the last value reserved (the next caller aligns it to its
    // own increment and offset), as InnoDB's does.
    next = first + (nb_desired_values - 1) * increment + 1;
    if (share_->next_auto_increment.compare_exchange_weak(current, next)) break;
  }
  share_->persist_auto_increment(next);
  *first_value = first;
  *nb_reserved_values = nb_desired_values;
}

int ha_riptide::reset_auto_increment(ulonglong value) {
  share_->next_auto_increment = value > 0 ? value : 1;
  return share_->persist_auto_increment(value > 0 ? value : 1, true);
}
