/* A benchmark anchor, not part of Waybill: the least a keep-alive HTTP request can cost through
 * libwebsockets 4.1 on its libev loop, as Waybill's server runs it. It answers every request with
 * the head and `{"status":"ok"}` in one write and ends the transaction; a PATCH or POST body is read
 * and dropped first. No store, no routing, no log, no thread.
 *
 * Why: docs/BENCHMARKS.md compares Waybill's CPU per request with this floor measured in the same
 * session (`scripts/bench.sh floor RATE SECONDS get|patch`), which tells lws's own share of a
 * request from Waybill's.
 *
 *   cc -O2 -o lws_floor scripts/lws_floor.c -lwebsockets
 *   ./lws_floor PORT            (stops on SIGTERM or SIGINT)
 */
#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] = "{\"status\":\"ok\"}";

static int answer(struct lws *wsi) {
    unsigned char buffer[LWS_PRE + 256];
    char *text = (char *)buffer + LWS_PRE;
    int n = snprintf(text, 200, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %zu\r\n\r\n%s",
                     sizeof(body) - 1, body);
    if (lws_write(wsi, (unsigned char *)text, (size_t)n, LWS_WRITE_HTTP_HEADERS) != n) return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    switch (reason) {
    case LWS_CALLBACK_HTTP:
        if (lws_hdr_total_length(wsi, WSI_TOKEN_PATCH_URI) > 0 || lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0)
            return 0; /* the answer goes after the body */
        return answer(wsi);
    case LWS_CALLBACK_HTTP_BODY:
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        return answer(wsi);
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static struct lws_protocols protocols[] = {
    {"http", callback, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* lws runs libev's loop itself here and does not return from it: a signal ends the process. */
static void stop(int signal) {
    (void)signal;
    _exit(0);
}

int main(int argc, char **argv) {
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = argc > 1 ? atoi(argv[1]) : 18099;
    info.protocols = protocols;
    info.options = LWS_SERVER_OPTION_VALIDATE_UTF8 | LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND | LWS_SERVER_OPTION_LIBEV;
    lws_set_log_level(LLL_ERR, NULL);
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    struct lws_context *context = lws_create_context(&info);
    if (!context) {
        fprintf(stderr, "lws_floor: could not listen on port %d\n", info.port);
        return 1;
    }
    while (lws_service(context, 0) >= 0) {
    }
    lws_context_destroy(context);
    return 0;
}
