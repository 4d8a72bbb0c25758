#ifndef WAYBILL_CWEBSOCKETS_SHIM_H
#define WAYBILL_CWEBSOCKETS_SHIM_H
#include <libwebsockets.h>

/* Macros that Swift cannot import, as static inline functions. */
static inline size_t lwsx_pre(void) { return LWS_PRE; }
static inline lws_filepos_t lwsx_no_len(void) { return LWS_ILLEGAL_HTTP_CONTENT_LEN; }

/* A timer: the sul must be the first field so the callback can find its owner. */
typedef struct lwsx_timer { lws_sorted_usec_list_t sul; void *owner; } lwsx_timer;
static inline lws_sorted_usec_list_t *lwsx_timer_sul(lwsx_timer *t) { return &t->sul; }
static inline void *lwsx_timer_owner(lws_sorted_usec_list_t *s) { return ((lwsx_timer *)s)->owner; }
#endif
