import CWebSockets

#if canImport(Glibc)
    import Glibc
#endif

/// Closing kept-alive connections that stay idle for `keepAliveTimeout`, with `KeepAliveWheel`
/// on the heartbeat's 100 ms tick instead of one lws timer per idle connection (see the wheel for
/// why). lws's own keep-alive timer is still set (to the same timeout) for the connections this
/// does not take over; none of Waybill's answers leaves one there past a tick.
extension ServerCore {
    /// Idle connections closed in one tick at most; the rest wait for the next (they are idle:
    /// a few hundred milliseconds late costs nothing). Why: a herd of connections that went idle in
    /// the same 100 ms would otherwise all close in one callback, and on lws's poll loop each close
    /// also inserts a flush timer into lws's sorted list behind the others (found by a review).
    static let keepAliveClosesPerTick = 256

    /// A session's answer ended its transaction with the connection kept open (`HTTPSession.keptAlive`).
    func connectionWentIdle(_ wsi: OpaquePointer) {
        guard lwsHasLetGo(of: wsi) else {
            // lws still holds the answer's tail: it ends the transaction itself once that is sent
            // (a large answer to a slow reader), with no callback here. Or lws has not let go of
            // the session (it ends the transaction later by itself, e.g. after discarding a body
            // nobody read; no answer of Waybill's does that now). The tick takes it over then;
            // until then lws's own timers stay on it.
            answersStillSending.insert(wsi)
            return
        }
        takeOverKeepAlive(wsi)
    }

    /// Whether lws has ended the connection's transaction: sent all of the answer and let go of
    /// the session (its slot is empty).
    private func lwsHasLetGo(of wsi: OpaquePointer) -> Bool {
        lws_partial_buffered(wsi) == 0 && isIdleHTTPConnection(wsi)
    }

    /// lws's timer off (a removal from its list, no walk), the wheel's on.
    private func takeOverKeepAlive(_ wsi: OpaquePointer) {
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        keepAlive.add(wsi)
    }

    /// A request began on `wsi`, it became a WebSocket, or lws is freeing it: not idle any more.
    func connectionIsBusy(_ wsi: OpaquePointer) {
        keepAlive.remove(wsi)
        if !answersStillSending.isEmpty { answersStillSending.remove(wsi) }  // nearly always empty: no hash
    }

    /// The heartbeat's tick (a timer callback, never inside a socket's callback): connections whose
    /// answer lws finished sending are idle now; those idle for the timeout are closed.
    func keepAliveTicked() {
        // A new request on one of these connections would have taken it out of the set.
        for wsi in answersStillSending where lwsHasLetGo(of: wsi) {
            answersStillSending.remove(wsi)
            writeStatistics.keepAliveAfterSending += 1
            takeOverKeepAlive(wsi)
        }
        for wsi in keepAlive.tick(limit: Self.keepAliveClosesPerTick) where isIdleHTTPConnection(wsi) {
            if Self.hasRequestHeadArriving(wsi) || Self.hasUnreadBytes(lws_get_socket_fd(wsi)) {
                // The next request has begun to arrive (a slow link, pipelined bytes lws kept, or
                // bytes lws has not read yet: on lws's poll loop timers run before the sockets are
                // looked at): not idle. Bounded as lws bounds a head it waits for; a complete head
                // sets the request's own timers.
                lws_set_timeout(
                    wsi, PENDING_TIMEOUT_HOLDING_AH, Int32(clamping: Self.wholeSeconds(configuration.lwsTimeout)))
                continue
            }
            writeStatistics.keepAliveCloses += 1
            // At once, as lws's own keep-alive timer closes (from its timer list, like this tick).
            // Asynchronously (`LWS_TO_KILL_ASYNC`) each close would be one more timer "due now"
            // inserted behind the others of this tick: k closes, k²/2 steps (found by a review).
            // The destroy callback this runs takes the connection out of the wheel, not out of the
            // list being walked (`tick()` returned a copy).
            lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_KEEPALIVE_IDLE, LWS_TO_KILL_SYNC)
        }
    }

    /// Whether lws holds the start of a request's head on `wsi`: the request line's method and at
    /// least part of its target have been read (lws records the target under the method's token).
    /// lws's own table of methods (`lws_http_get_uri_and_method`, which logs a warning when it
    /// finds none). A head cut inside its method name ("GE") is not seen: such a connection is
    /// closed at its turn, the race of any keep-alive close.
    static func hasRequestHeadArriving(_ wsi: OpaquePointer) -> Bool {
        requestTargetTokens.contains { lws_hdr_total_length(wsi, $0) > 0 }
    }

    /// Whether the kernel holds bytes from the peer that lws has not read yet. One `ioctl` per
    /// connection at its turn, never per request.
    static func hasUnreadBytes(_ fd: Int32) -> Bool {
        var count: Int32 = 0
        return fd >= 0 && ioctl(fd, UInt(FIONREAD), &count) == 0 && count > 0
    }

    private static let requestTargetTokens: [lws_token_indexes] = [
        WSI_TOKEN_GET_URI, WSI_TOKEN_POST_URI, WSI_TOKEN_OPTIONS_URI, WSI_TOKEN_PUT_URI, WSI_TOKEN_PATCH_URI,
        WSI_TOKEN_DELETE_URI, WSI_TOKEN_CONNECT, WSI_TOKEN_HEAD_URI,
    ]
}
