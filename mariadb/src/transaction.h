// Transaction glue: each connection that touches a RIPTIDE table has one Riptide transaction,
// begun at its first statement and ended by the server's commit or rollback (of the statement
// in autocommit mode, of the whole transaction otherwise). A statement inside a multi-statement
// transaction runs above a Riptide savepoint, so that a failed statement is undone alone, as
// InnoDB does; SQL savepoints are Riptide savepoints too.
//
// Concurrency contract: a Connection belongs to one THD and is used only by the thread serving
// it.
#ifndef RIPTIDE_MARIADB_TRANSACTION_H
#define RIPTIDE_MARIADB_TRANSACTION_H

#include <my_global.h>
#include <handler.h>

#include "riptide.h"

namespace riptide_sql {

struct Connection {
  riptide_txn_t *transaction = nullptr;
  // The transaction options, kept for the connection's next transactions.
  riptide_txn_options_t *options = nullptr;
  // Open Riptide savepoints: SQL savepoints and, on top, the statement's own.
  unsigned savepoint_depth = 0;
  // True while the current statement has its own savepoint (in a multi-statement transaction).
  bool statement_savepoint = false;
  // True once the transaction is prepared (XA PREPARE, or the first phase of the binlog's
  // two-phase commit): it can only be committed or rolled back, and a disconnect leaves it
  // prepared in the engine for XA COMMIT / XA ROLLBACK by xid (or recovery after a restart).
  bool prepared = false;
  // Bumped by every change of the transaction's write set made through this connection (a
  // put, a delete, a rollback to a savepoint, a prepare) and by every new transaction: an
  // iterator created at one generation reads exactly as a new one while the generation holds
  // and the snapshot does (see iterators_reusable).
  uint64_t write_generation = 0;
  // Whether an iterator may serve scans of later statements of the transaction: under
  // REPEATABLE READ only. READ COMMITTED reads each statement at a new snapshot; SERIALIZABLE
  // (whose iterators record the ranges they read for the commit's validation) is left out
  // until its reuse is measured and tested on its own.
  bool iterators_reusable = false;
  // Whether scans may read ahead (every isolation level but SERIALIZABLE; see ha_riptide's
  // ReadAhead).
  bool read_ahead = false;
  // The settings `options` holds (set on the first begin, then only when a session changes
  // them: four C ABI calls a transaction otherwise).
  bool options_set = false;
  int options_isolation = 0;
  uint64_t options_lock_timeout_us = 0;
  bool options_deadlock_detection = false;
  bool options_sync = false;
};

// The connection's state, created on first use.
Connection *connection(THD *thd);

// Begins the connection's transaction if none is open, registers it with the server for the
// statement (and the whole transaction unless autocommit), and opens the statement's savepoint
// when the statement may write (`writes`: it holds a write lock on the table): a statement
// that only reads has nothing to undo, so it takes none (two C ABI calls per read statement).
// `locking` tells that the statement locks the rows it reads (see isolation_of in
// transaction.cc). Returns 0 or a handler error code.
int begin_statement(THD *thd, bool locking, bool writes);

// Installs commit, rollback, savepoint, XA (prepare, recover, commit and rollback by xid) and
// connection-close callbacks on `hton`.
void install_transaction_callbacks(handlerton *hton);

}  // namespace riptide_sql

#endif
