// See transaction.h. Runs on the thread serving the connection.
#include "transaction.h"

#include <mysqld_error.h>
#include <sql_class.h>

#include <mutex>
#include <set>
#include <string>

#include "engine.h"

namespace riptide_sql {

namespace {

// Each SQL savepoint stores the Riptide savepoint depth it was set at.
struct SavepointSlot {
  unsigned depth;
};

int isolation_of(THD *thd, bool single_locking_statement) {
  // A statement that locks what it reads (UPDATE, DELETE, ... FOR UPDATE) and is a whole
  // transaction by itself (autocommit) runs under READ COMMITTED: its locking reads then see
  // the latest committed row after a lock wait, as InnoDB's do, instead of failing the
  // snapshot's first-committer-wins check. Its plain reads lose nothing: one statement.
  if (single_locking_statement) return RIPTIDE_ISOLATION_READ_COMMITTED;
  switch (thd_tx_isolation(thd)) {
    case ISO_READ_UNCOMMITTED:
    case ISO_READ_COMMITTED:
      return RIPTIDE_ISOLATION_READ_COMMITTED;
    case ISO_SERIALIZABLE:
      return RIPTIDE_ISOLATION_SERIALIZABLE;
    default:
      return RIPTIDE_ISOLATION_REPEATABLE_READ;
  }
}

// Ends the connection's transaction (commit or rollback) and forgets it.
int end_transaction(Connection *state, bool commit) {
  riptide_error_t *error = nullptr;
  riptide_code_t code = RIPTIDE_OK;
  if (state->transaction != nullptr) {
    // A transaction that wrote nothing has nothing to make durable: ending it by rollback
    // spares it the commit's log sync (riptide_flush_log_at_trx_commit = 1), which would
    // otherwise cost every read-only transaction a disk flush. Its reads were consistent
    // either way, and a read-only SERIALIZABLE transaction needs no validation.
    // A prepared transaction's write set lives in the engine's prepared registry (its write
    // count reads 0): it is always decided as asked.
    uint64_t writes = 1;
    if (commit && !state->prepared &&
        riptide_txn_info(state->transaction, nullptr, &writes, nullptr, nullptr, nullptr) == RIPTIDE_OK && writes == 0)
      commit = false;
    code = commit ? riptide_txn_commit(state->transaction, &error) : riptide_txn_rollback(state->transaction, &error);
    riptide_txn_destroy(state->transaction);
  }
  state->transaction = nullptr;
  state->savepoint_depth = 0;
  state->statement_savepoint = false;
  state->prepared = false;
  if (code == RIPTIDE_OK) return 0;
  if (commit && (code == RIPTIDE_CONFLICT || code == RIPTIDE_DEADLOCK)) {
    // The commit's validation failed: nothing was written. Say so with the error a client
    // retries on (the server only adds "error during commit" after it).
    riptide_error_free(error);
    my_error(ER_LOCK_DEADLOCK, MYF(0));
    return HA_ERR_LOCK_DEADLOCK;
  }
  return report(code, error);
}

// Begins the connection's Riptide transaction with the session's settings.
int begin_transaction(THD *thd, Connection *state, bool single_locking_statement) {
  riptide_error_t *error = nullptr;
  riptide_code_t code = RIPTIDE_OK;
  // The options object lives as long as the connection; each begin sets every field.
  if (state->options == nullptr) code = riptide_txn_options_create(&state->options, &error);
  riptide_txn_options_t *options = state->options;
  const int isolation = isolation_of(thd, single_locking_statement);
  const uint64_t lock_timeout_us = lock_wait_timeout_us(thd);
  const bool deadlock_detection = deadlock_detect();
  const bool sync = flush_log_at_trx_commit() == 1;
  // Each setting is passed on only when it differs from what the options object holds.
  const bool all = !state->options_set;
  if (code == RIPTIDE_OK && (all || isolation != state->options_isolation))
    code = riptide_txn_options_set_isolation(options, isolation, &error);
  if (code == RIPTIDE_OK && (all || lock_timeout_us != state->options_lock_timeout_us))
    code = riptide_txn_options_set_lock_timeout_us(options, lock_timeout_us, &error);
  if (code == RIPTIDE_OK && (all || deadlock_detection != state->options_deadlock_detection))
    code = riptide_txn_options_set_deadlock_detection(options, deadlock_detection ? 1 : 0, &error);
  if (code == RIPTIDE_OK && (all || sync != state->options_sync))
    code = riptide_txn_options_set_sync(options, sync ? 1 : 0, &error);
  if (code == RIPTIDE_OK) {
    state->options_set = true;
    state->options_isolation = isolation;
    state->options_lock_timeout_us = lock_timeout_us;
    state->options_deadlock_detection = deadlock_detection;
    state->options_sync = sync;
  } else {
    // A failed setter leaves the object's settings unknown: set all of them next time.
    state->options_set = false;
  }
  if (code == RIPTIDE_OK) code = riptide_txn_begin(database(), options, &state->transaction, &error);
  if (code != RIPTIDE_OK) {
    state->transaction = nullptr;
    return report(code, error);
  }
  state->savepoint_depth = 0;
  state->statement_savepoint = false;
  state->iterators_reusable = isolation == RIPTIDE_ISOLATION_REPEATABLE_READ;
  state->read_ahead = isolation != RIPTIDE_ISOLATION_SERIALIZABLE;
  state->write_generation++;
  return 0;
}

// START TRANSACTION WITH CONSISTENT SNAPSHOT: begin now, so the snapshot is taken now.
int start_consistent_snapshot(handlerton *, THD *thd) {
  Connection *state = connection(thd);
  if (state->transaction == nullptr) {
    if (int result = begin_transaction(thd, state, false)) return result;
  }
  trans_register_ha(thd, true, hton(), 0);
  return 0;
}

int commit(handlerton *, THD *thd, bool all) {
  Connection *state = connection(thd);
  const bool ends_transaction = all || !thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
  if (ends_transaction) return end_transaction(state, true);
  // The end of a statement inside a transaction: its changes stay, its savepoint goes.
  if (state->statement_savepoint && state->transaction != nullptr) {
    riptide_txn_release_savepoint(state->transaction, nullptr);
    state->savepoint_depth--;
    state->statement_savepoint = false;
  }
  return 0;
}

int rollback(handlerton *, THD *thd, bool all) {
  Connection *state = connection(thd);
  const bool ends_transaction = all || !thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
  if (ends_transaction) return end_transaction(state, false);
  // A failed statement inside a transaction: undo only what it did.
  if (state->statement_savepoint && state->transaction != nullptr) {
    riptide_error_t *error = nullptr;
    const riptide_code_t code = riptide_txn_rollback_to_savepoint(state->transaction, &error);
    state->write_generation++;
    state->savepoint_depth--;
    state->statement_savepoint = false;
    if (code != RIPTIDE_OK) return report(code, error);
  }
  return 0;
}

int savepoint_set(handlerton *, THD *thd, void *slot) {
  Connection *state = connection(thd);
  if (state->transaction == nullptr) return 0;
  riptide_error_t *error = nullptr;
  const riptide_code_t code = riptide_txn_savepoint(state->transaction, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  state->savepoint_depth++;
  static_cast<SavepointSlot *>(slot)->depth = state->savepoint_depth;
  return 0;
}

int savepoint_rollback(handlerton *, THD *thd, void *slot) {
  Connection *state = connection(thd);
  const unsigned depth = static_cast<SavepointSlot *>(slot)->depth;
  if (state->transaction == nullptr || depth == 0 || depth > state->savepoint_depth) return 0;
  riptide_error_t *error = nullptr;
  // Roll back to the savepoint (closing the newer ones), then open it again: the SQL savepoint
  // stays valid for another ROLLBACK TO.
  while (state->savepoint_depth >= depth) {
    const riptide_code_t code = riptide_txn_rollback_to_savepoint(state->transaction, &error);
    state->write_generation++;
    state->savepoint_depth--;
    if (code != RIPTIDE_OK) return report(code, error);
  }
  const riptide_code_t code = riptide_txn_savepoint(state->transaction, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  state->savepoint_depth++;
  state->statement_savepoint = false;
  return 0;
}

int savepoint_release(handlerton *, THD *thd, void *slot) {
  Connection *state = connection(thd);
  const unsigned depth = static_cast<SavepointSlot *>(slot)->depth;
  if (state->transaction == nullptr || depth == 0) return 0;
  while (state->savepoint_depth >= depth) {
    riptide_txn_release_savepoint(state->transaction, nullptr);
    state->savepoint_depth--;
  }
  return 0;
}

// The engine's xid for a server XID: formatID (4 bytes, little endian), the lengths of the
// global transaction id and of the branch qualifier (a byte each, at most 64), then their
// bytes. docs/sql/storage.md describes it.
std::string encode_xid(const XID &xid) {
  std::string bytes;
  const uint32_t format = static_cast<uint32_t>(xid.formatID);
  for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<char>((format >> shift) & 0xff));
  bytes.push_back(static_cast<char>(xid.gtrid_length));
  bytes.push_back(static_cast<char>(xid.bqual_length));
  bytes.append(xid.data, static_cast<size_t>(xid.gtrid_length + xid.bqual_length));
  return bytes;
}

// The server XID of an engine xid written by encode_xid; false for bytes it did not write.
bool decode_xid(const uint8_t *bytes, size_t length, XID *xid) {
  if (length < 6) return false;
  uint32_t format = 0;
  for (int i = 0; i < 4; i++) format |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  const size_t gtrid = bytes[4], bqual = bytes[5];
  if (gtrid > MAXGTRIDSIZE || bqual > MAXBQUALSIZE || length != 6 + gtrid + bqual) return false;
  xid->set(static_cast<long>(static_cast<int32_t>(format)), reinterpret_cast<const char *>(bytes + 6), gtrid,
           reinterpret_cast<const char *>(bytes + 6 + gtrid), bqual);
  return true;
}

// The first phase of a two-phase commit (XA PREPARE, or the binlog's prepare): makes the
// transaction's writes durable but invisible under the connection's XID. A statement inside a
// multi-statement transaction has nothing to prepare, nor has a transaction that wrote
// nothing (its commit is a rollback anyway).
int prepare(handlerton *, THD *thd, bool all) {
  Connection *state = connection(thd);
  const bool ends_transaction = all || !thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
  if (!ends_transaction || state->transaction == nullptr || state->prepared) return 0;
  uint64_t writes = 0;
  riptide_error_t *error = nullptr;
  riptide_code_t code = riptide_txn_info(state->transaction, nullptr, &writes, nullptr, nullptr, &error);
  if (code != RIPTIDE_OK) return report(code, error);
  if (writes == 0) return 0;
  XID xid;
  thd_get_xid(thd, reinterpret_cast<MYSQL_XID *>(&xid));
  const std::string bytes = encode_xid(xid);
  state->write_generation++;
  code = riptide_txn_prepare(state->transaction, reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
                             &error);
  if (code == RIPTIDE_CONFLICT || code == RIPTIDE_DEADLOCK) {
    // Validation failed: the transaction stays active and the server rolls it back.
    riptide_error_free(error);
    my_error(ER_LOCK_DEADLOCK, MYF(0));
    return HA_ERR_LOCK_DEADLOCK;
  }
  if (code != RIPTIDE_OK) return report(code, error);
  state->prepared = true;
  return 0;
}

// Engine xids already handed to the server by recover(): the server calls it until it returns
// nothing, and the prepared transactions it leaves undecided (an external transaction
// manager's) must not come back each time.
std::mutex reported_mutex;
std::set<std::string> reported_xids;

int recover(handlerton *, XID *xid_list, uint length) {
  uint8_t **xids = nullptr;
  size_t *lengths = nullptr;
  size_t count = 0;
  if (riptide_prepared_transactions(database(), &xids, &lengths, &count, nullptr) != RIPTIDE_OK) return 0;
  uint found = 0;
  {
    std::lock_guard<std::mutex> guard(reported_mutex);
    for (size_t i = 0; i < count && found < length; i++) {
      // Each xid is looked at once per server run, whether or not it decodes.
      if (!reported_xids.insert(std::string(reinterpret_cast<const char *>(xids[i]), lengths[i])).second) continue;
      if (!decode_xid(xids[i], lengths[i], &xid_list[found])) {
        sql_print_warning("RIPTIDE: a prepared transaction's xid of %zu bytes is not a server XID; left prepared",
                          lengths[i]);
        continue;
      }
      found++;
    }
  }
  riptide_free_bytes_list(xids, lengths, count);
  return static_cast<int>(found);
}

// The X/Open XA return code for an unknown xid (XAER_NOTA), which the server's headers leave to
// each engine to define.
constexpr int kXaerNota = -4;

int decide_by_xid(XID *xid, bool commit) {
  const std::string bytes = encode_xid(*xid);
  riptide_error_t *error = nullptr;
  const uint8_t *data = reinterpret_cast<const uint8_t *>(bytes.data());
  const riptide_code_t code = commit ? riptide_commit_prepared(database(), data, bytes.size(), &error)
                                     : riptide_rollback_prepared(database(), data, bytes.size(), &error);
  if (code == RIPTIDE_INVALID_ARGUMENT) {
    // Not prepared here (another engine's branch, or already decided).
    riptide_error_free(error);
    return kXaerNota;
  }
  if (code != RIPTIDE_OK) return report(code, error);
  std::lock_guard<std::mutex> guard(reported_mutex);
  reported_xids.erase(bytes);
  return 0;
}

int commit_by_xid(handlerton *, XID *xid) { return decide_by_xid(xid, true); }

int rollback_by_xid(handlerton *, XID *xid) { return decide_by_xid(xid, false); }

int close_connection(handlerton *hton, THD *thd) {
  Connection *state = static_cast<Connection *>(thd_get_ha_data(thd, hton));
  if (state != nullptr) {
    if (state->prepared) {
      // A prepared XA transaction outlives its connection (the server detached it): drop the
      // handle only; the engine keeps the transaction prepared, locks and all.
      riptide_txn_destroy(state->transaction);
      state->transaction = nullptr;
      state->prepared = false;
    }
    end_transaction(state, false);
    if (state->options != nullptr) riptide_txn_options_destroy(state->options);
    delete state;
    thd_set_ha_data(thd, hton, nullptr);
  }
  return 0;
}

}  // namespace

Connection *connection(THD *thd) {
  Connection *state = static_cast<Connection *>(thd_get_ha_data(thd, hton()));
  if (state == nullptr) {
    state = new Connection();
    thd_set_ha_data(thd, hton(), state);
  }
  return state;
}

int begin_statement(THD *thd, bool locking, bool writes) {
  Connection *state = connection(thd);
  const bool in_transaction = thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
  riptide_error_t *error = nullptr;
  if (state->transaction == nullptr) {
    if (int result = begin_transaction(thd, state, locking && !in_transaction)) return result;
  }
  if (in_transaction) trans_register_ha(thd, true, hton(), 0);
  trans_register_ha(thd, false, hton(), 0);
  if (in_transaction && writes && !state->statement_savepoint) {
    const riptide_code_t code = riptide_txn_savepoint(state->transaction, &error);
    if (code != RIPTIDE_OK) return report(code, error);
    state->savepoint_depth++;
    state->statement_savepoint = true;
  }
  return 0;
}

void install_transaction_callbacks(handlerton *hton) {
  hton->commit = commit;
  hton->rollback = rollback;
  hton->savepoint_offset = sizeof(SavepointSlot);
  hton->savepoint_set = savepoint_set;
  hton->savepoint_rollback = savepoint_rollback;
  hton->savepoint_release = savepoint_release;
  hton->close_connection = close_connection;
  hton->start_consistent_snapshot = start_consistent_snapshot;
  hton->prepare = prepare;
  hton->recover = recover;
  hton->commit_by_xid = commit_by_xid;
  hton->rollback_by_xid = rollback_by_xid;
}

}  // namespace riptide_sql
