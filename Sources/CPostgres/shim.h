#ifndef WAYBILL_CPOSTGRES_SHIM_H
#define WAYBILL_CPOSTGRES_SHIM_H
#include <libpq-fe.h>
#include <poll.h>

/* The PG_DIAG_* fields are char-literal macros ('C'), which Swift cannot import. */
static const int wb_pq_diag_sqlstate = PG_DIAG_SQLSTATE;
static const int wb_pq_diag_constraint_name = PG_DIAG_CONSTRAINT_NAME;
static const int wb_pq_diag_message_primary = PG_DIAG_MESSAGE_PRIMARY;

/* Server notices (e.g. "terminating connection due to administrator command") are dropped
   instead of going to stderr, libpq's default: a server's own text never reaches our output. */
static void wb_pq_ignore_notice(void *arg, const PGresult *result) { (void)arg; (void)result; }
static inline void wb_pq_silence_notices(PGconn *conn) { PQsetNoticeReceiver(conn, wb_pq_ignore_notice, NULL); }
#endif
