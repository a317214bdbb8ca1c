// The Riptide engine inside mariadbd: the one database every RIPTIDE table lives in (opened
// when the plugin initialises, closed when it is unloaded), the handlerton, the system and
// status variables, SHOW ENGINE RIPTIDE STATUS, and how Riptide's errors become the server's.
//
// Concurrency contract: the database handle is set once at plugin init (before any connection
// uses the engine) and cleared at deinit (after the last one); the C ABI's handles may be used
// from any thread. The row counters are relaxed atomics.
#ifndef RIPTIDE_MARIADB_ENGINE_H
#define RIPTIDE_MARIADB_ENGINE_H

#include <my_global.h>
#include <handler.h>

#include <atomic>
#include <cstdint>

#include "riptide.h"

namespace riptide_sql {

// The database of all RIPTIDE tables (`<datadir>/riptide/`).
riptide_db_t *database();

// The handlerton, for the transaction glue.
handlerton *hton();

// Reports a failed Riptide call and returns the handler error code that goes with it (a lock
// wait timeout, a deadlock or serialization failure, a full lock table, or a generic error
// whose message reaches the client); frees `error`. A deadlock or serialization failure marks
// the whole transaction for rollback, as InnoDB does.
int report(riptide_code_t code, riptide_error_t *error);

// riptide_flush_log_at_trx_commit: 1 sync per commit, 2 the WAL is synced about once a second,
// 0 no sync by the engine.
unsigned long flush_log_at_trx_commit();

// riptide_lock_wait_timeout of the session, in microseconds.
uint64_t lock_wait_timeout_us(THD *thd);

// riptide_deadlock_detect.
bool deadlock_detect();

// Creates column family `name` with the options every table's family gets (memtable size,
// level-0 compaction trigger from the system variables). Returns the Riptide code.
riptide_code_t create_family(const char *name, riptide_cf_t **out, riptide_error_t **error);

// Counters shown as status variables.
struct Counters {
  std::atomic<uint64_t> rows_read{0};
  std::atomic<uint64_t> rows_inserted{0};
  std::atomic<uint64_t> rows_updated{0};
  std::atomic<uint64_t> rows_deleted{0};
};
Counters &counters();

}  // namespace riptide_sql

#endif
