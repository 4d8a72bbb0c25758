/// `SocketIO` for delegate calls and `execute` bodies: a thin view of `ServerCore`'s sockets.
///
/// Valid only on the service thread; debug builds assert it, because socket state has no lock.
///
/// Holds its core unmanaged and borrows it for each call: the core owns its one `io`, and hands it
/// out only to calls it runs on its service thread (delegate calls, posted work), which use it
/// before they return; no caller keeps it. An `unowned` reference cost an atomic retain and
/// release per `send` — on the slow path, since the core's weak references give it a side table —
/// about 2.5 % of the service thread in fan-out (docs/BENCHMARKS.md, "fan-out per frame").
struct ServerSocketIO: SocketIO {
    private let unmanaged: Unmanaged<ServerCore>

    init(core: ServerCore) { unmanaged = .passUnretained(core) }

    /// Runs `body` with the core, borrowed (no retain).
    @inline(__always) private func withCore<T>(_ body: (ServerCore) -> T) -> T {
        unmanaged._withUnsafeGuaranteedRef { core in
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
