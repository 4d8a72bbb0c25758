#ifndef WAYBILL_CSQLITE_SHIM_H
#define WAYBILL_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro Swift cannot import: bound values are copied by SQLite. */
static inline sqlite3_destructor_type wb_sqlite_transient(void) { return SQLITE_TRANSIENT; }
/* SQLITE_STATIC: SQLite reads the bound bytes in place until the parameter is bound again. */
static inline sqlite3_destructor_type wb_sqlite_static(void) { return SQLITE_STATIC; }

/* Extended result codes are `(primary | (n << 8))` macros, which Swift cannot import either. */
static const int wb_sqlite_constraint_unique = SQLITE_CONSTRAINT_UNIQUE;
static const int wb_sqlite_constraint_primarykey = SQLITE_CONSTRAINT_PRIMARYKEY;
static const int wb_sqlite_constraint_foreignkey = SQLITE_CONSTRAINT_FOREIGNKEY;
static const int wb_sqlite_ioerr_write = SQLITE_IOERR_WRITE;

/* sqlite3_config is variadic, which Swift cannot call. Turns SQLite's memory statistics off for the
 * process; only before SQLite is initialized (SQLITE_MISUSE after). */
static inline int wb_sqlite_memory_statistics_off(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
#endif
