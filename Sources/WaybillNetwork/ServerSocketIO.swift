/// `SocketIO` for delegate calls and `execute` bodies: a thin view of `ServerCore`'s sockets.
///
/// Valid only on the service thread; debug builds assert it, because socket state has no lock.
///
/// Holds its core unmanaged and borrows it for each call: the core owns its one `io`, and hands it
/// out only to calls it runs on its service thread (delegate calls, posted work), which use it
/// before they return; no caller keeps it. An `unowned` reference cost an atomic retain and
/// release per `send` — on the slow path, since the core's weak references give it a side table —
/// about 2.5 % of the service thread in fan-out (docs/BENCHMARKS.md, section "2026-12-07 (13:50– UTC)").
struct ServerSocketIO: SocketIO {
    private let unmanaged: Unmanaged<ServerCore>
    #if DEBUG
        /// Debug builds (the tests) check that the core is still there: a kept `io` used after its
        /// server went would otherwise read freed memory silently.
        private weak var checked: ServerCore?
    #endif

    init(core: ServerCore) {
        unmanaged = .passUnretained(core)
        #if DEBUG
            checked = core
        #endif
    }

    /// Runs `body` with the core, borrowed (no retain).
    @inline(__always) private func withCore<T>(_ body: (ServerCore) -> T) -> T {
        #if DEBUG
            precondition(checked != nil, "SocketIO used after its server was freed")
        #endif
        return unmanaged._withUnsafeGuaranteedRef { core in
            assert(core.loop.isOnLoop, "SocketIO used off the service thread")
            return body(core)
        }
    }

    @discardableResult func send(_ frame: OutboundFrame, to socket: SocketID) -> Bool {
        withCore { $0.send(frame, to: socket) }
    }

    @discardableResult func send(_ frames: [OutboundFrame], to socket: SocketID) -> Int {
        withCore { $0.send(frames, to: socket) }
    }

    func close(_ socket: SocketID, code: Int, reason: String) {
        withCore { $0.close(socket, code: code, reason: reason) }
    }

    func isOpen(_ socket: SocketID) -> Bool {
        withCore { $0.sockets[socket]?.isOpen ?? false }
    }

    func queuedBytes(_ socket: SocketID) -> Int {
        withCore { $0.sockets[socket]?.queuedBytes ?? 0 }
    }
}
