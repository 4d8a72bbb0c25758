#ifndef WAYBILL_CSQLITE_SHIM_H
#define WAYBILL_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro Swift cannot import: bound values are copied by SQLite. */
static inline sqlite3_destructor_type wb_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
