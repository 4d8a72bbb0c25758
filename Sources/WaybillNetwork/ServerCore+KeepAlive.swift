import CWebSockets

/// Closing kept-alive connections that stay idle for `keepAliveTimeout`, with `KeepAliveWheel`
/// on the heartbeat's 100 ms tick instead of one lws timer per idle connection (see the wheel for
/// why). lws's own keep-alive timer is still set (to the same timeout) for the connections this
/// does not take over; none of Waybill's answers leaves one there past a tick.
extension ServerCore {
    /// A session's answer ended its transaction with the connection kept open (`HTTPSession.keptAlive`).
    func connectionWentIdle(_ wsi: OpaquePointer) {
        guard lws_partial_buffered(wsi) == 0 else {
            // lws still holds the answer's tail: it ends the transaction itself once that is sent
            // (a large answer to a slow reader), with no callback here. The tick takes it over then.
            answersStillSending.insert(wsi)
            return
        }
        takeOverKeepAlive(wsi)
    }

    /// lws's timer off (a removal from its list, no walk), the wheel's on.
    private func takeOverKeepAlive(_ wsi: OpaquePointer) {
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        keepAlive.add(wsi)
    }

    /// A request began on `wsi`, it became a WebSocket, or lws is freeing it: not idle any more.
    func connectionIsBusy(_ wsi: OpaquePointer) {
        keepAlive.remove(wsi)
        answersStillSending.remove(wsi)
    }

    /// The heartbeat's tick: connections whose answer lws finished sending are idle now; those idle
    /// for the timeout are closed.
    func keepAliveTicked() {
        if !answersStillSending.isEmpty {
            // The transaction is over once lws has sent the tail and let go of the session (the slot
            // is empty); a new request on the connection would have taken it out of this set.
            for wsi in answersStillSending where lws_partial_buffered(wsi) == 0 && slotObject(lws_wsi_user(wsi)) == nil {
                answersStillSending.remove(wsi)
                takeOverKeepAlive(wsi)
            }
        }
        for wsi in keepAlive.tick() where isIdleHTTPConnection(wsi) {
            // Asynchronous, as lws's own keep-alive timer closes: lws may be inside a callback of this pass.
            writeStatistics.keepAliveCloses += 1
            lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_KEEPALIVE_IDLE, LWS_TO_KILL_ASYNC)
        }
    }
}
