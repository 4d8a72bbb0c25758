import WaybillDomain

/// How many text frames one socket may send: a token bucket that refills at `perSecond` and holds
/// at most `burst`. A value, fed the time elapsed on the hub's clock; tested without sockets.
///
/// Why: every frame a client sends is read, parsed and (a ping) answered on the one service
/// thread. An app pings every 10 s and reports `seen` after a fetch; a client sending pings as fast
/// as its link allows took that thread's time from every other socket (docs/HARDENING.md). Past the
/// budget (`Hub.Limits.maxFramesPerSecond`) the socket is closed with 1008; memory was bounded
/// before, CPU now is, per socket.
public struct FrameBudget: Sendable {
    public let perSecond: Double
    public let burst: Double
    private var tokens: Double
    private var last: Duration?

    public init(perSecond: Double, burst: Int) {
        self.perSecond = max(0, perSecond)
        self.burst = Double(max(1, burst))
        tokens = self.burst
    }

    /// Takes one frame's worth at `now`; `false` when the socket is over its budget.
    public mutating func take(at now: Duration) -> Bool {
        if let last, now > last {
            tokens = min(burst, tokens + (now - last).timeInterval * perSecond)
        }
        last = max(last ?? now, now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
