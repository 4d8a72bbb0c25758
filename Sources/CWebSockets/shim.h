#ifndef WAYBILL_CWEBSOCKETS_SHIM_H
#define WAYBILL_CWEBSOCKETS_SHIM_H
#include <libwebsockets.h>
#include <ev.h>
#include <sys/resource.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <stddef.h>

/* Macros that Swift cannot import, as static inline functions. */
/* accept4 is declared only under _GNU_SOURCE, which Swift's Glibc module is not built with. The
 * server's own listener (ListeningSocket.swift) accepts non-blocking, close-on-exec sockets. */
extern int accept4(int, struct sockaddr *, socklen_t *, int);
static inline int lwsx_accept(int listener) { return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

static inline size_t lwsx_pre(void) { return LWS_PRE; }
static inline lws_filepos_t lwsx_no_len(void) { return LWS_ILLEGAL_HTTP_CONTENT_LEN; }

/* A timer: the sul must be the first field so the callback can find its owner. */
typedef struct lwsx_timer { lws_sorted_usec_list_t sul; void *owner; } lwsx_timer;
static inline lws_sorted_usec_list_t *lwsx_timer_sul(lwsx_timer *t) { return &t->sul; }
static inline void *lwsx_timer_owner(lws_sorted_usec_list_t *s) { return ((lwsx_timer *)s)->owner; }

/* libev, for lws's foreign-loop mode (LWS_SERVER_OPTION_LIBEV + info.foreign_loops). The loop travels
 * as `void *` because that is what `foreign_loops` holds; these wrappers keep ev.h's macro-heavy API
 * (EVFLAG_AUTO, EVBREAK_ALL, EVRUN_NOWAIT) out of Swift. */
static inline void *lwsx_ev_loop_new(void) { return ev_loop_new(EVFLAG_AUTO); }
/* Runs until `lwsx_ev_break`; returns whether watchers are still active. */
static inline int lwsx_ev_run(void *loop) { return ev_run((struct ev_loop *)loop, 0); }
/* One pass without blocking (lets watchers stopped by lws_context_destroy finish). */
static inline int lwsx_ev_run_nowait(void *loop) { return ev_run((struct ev_loop *)loop, EVRUN_NOWAIT); }
static inline void lwsx_ev_break(void *loop) { ev_break((struct ev_loop *)loop, EVBREAK_ALL); }
static inline void lwsx_ev_loop_destroy(void *loop) { ev_loop_destroy((struct ev_loop *)loop); }
/* A prepare watcher: libev calls `fn(owner)` on every pass just before it waits for events. The
 * watcher must be the first field so the callback can find the rest. Unreferenced while started, so
 * it alone never keeps `ev_run` going. */
typedef void (*lwsx_prepare_fn)(void *owner);
typedef struct lwsx_prepare { ev_prepare watcher; lwsx_prepare_fn fn; void *owner; } lwsx_prepare;
static inline void lwsx_prepare_fire(struct ev_loop *loop, ev_prepare *w, int revents) {
    (void)loop;
    (void)revents;
    lwsx_prepare *p = (lwsx_prepare *)w;
    p->fn(p->owner);
}
static inline void lwsx_prepare_start(void *loop, lwsx_prepare *p) {
    ev_prepare_init(&p->watcher, lwsx_prepare_fire);
    ev_prepare_start((struct ev_loop *)loop, &p->watcher);
    ev_unref((struct ev_loop *)loop);
}
static inline void lwsx_prepare_stop(void *loop, lwsx_prepare *p) {
    ev_ref((struct ev_loop *)loop);
    ev_prepare_stop((struct ev_loop *)loop, &p->watcher);
}
/* Tells libev that `fd` is writable, as its backend would (`ev_feed_fd_event`): the watchers on
 * `fd` that wait for EV_WRITE are called in this pass of `ev_run` (the only place it is called
 * from), through lws's own libev callback. */
static inline void lwsx_ev_feed_writable(void *loop, int fd) {
    if (fd >= 0) ev_feed_fd_event((struct ev_loop *)loop, fd, EV_WRITE);
}
/* The kernel backend libev chose (EVBACKEND_EPOLL is 4), for the start-up log and tests. */
static inline unsigned int lwsx_ev_backend(void *loop) { return ev_backend((struct ev_loop *)loop); }
/* How far a TCP peer has read what was sent to it, for the heartbeat (ServerCore+Heartbeat.swift).
 * glibc's struct tcp_info stops at tcpi_total_retrans; the kernel's (linux/tcp.h, an ABI that only
 * ever grows at its end) goes on with the fields below (bytes_acked since Linux 4.1). linux/tcp.h is
 * not included: it redefines what netinet/tcp.h, which Swift's Glibc module includes, defines. */
struct lwsx_tcp_info {
    struct tcp_info base;
    uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
};
_Static_assert(sizeof(struct tcp_info) == 104, "glibc's tcp_info is not the kernel's first 104 bytes");
/* How many bytes of the socket's output the peer has acknowledged, and how many were handed to the
 * kernel in all (acknowledged + SIOCOUTQ: not yet sent or not yet acknowledged). Read in that order,
 * so an acknowledgement arriving in between makes `written` too small, never too large. Returns -1
 * when the kernel cannot say (not TCP, or a kernel older than 4.1). */
static inline int lwsx_send_progress(struct lws *wsi, uint64_t *acked, uint64_t *written) {
    int fd = lws_get_socket_fd(wsi);
    struct lwsx_tcp_info info;
    socklen_t length = sizeof info;
    int queued = 0;
    memset(&info, 0, sizeof info);
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0
        || length < offsetof(struct lwsx_tcp_info, bytes_received)
        || ioctl(fd, TIOCOUTQ, &queued) != 0 || queued < 0)  /* SIOCOUTQ is TIOCOUTQ */
        return -1;
    *acked = info.bytes_acked;
    *written = info.bytes_acked + (uint64_t)queued;
    return 0;
}
#endif
