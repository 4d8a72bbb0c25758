#ifndef WAYBILL_CHIREDIS_SHIM_H
#define WAYBILL_CHIREDIS_SHIM_H

/* hiredis 0.14.1 (Debian libhiredis-dev). Imported only by WaybillRedis.
   The variadic redisCommand/redisAppendCommand do not import into Swift; WaybillRedis uses the
   binary-safe redisCommandArgv/redisAppendCommandArgv with explicit lengths instead. */
#include <hiredis/hiredis.h>

#endif
