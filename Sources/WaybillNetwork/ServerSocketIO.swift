/// `SocketIO` for delegate calls and `execute` bodies: a thin view of `ServerCore`'s sockets.
///
/// Valid only on the service thread; debug builds assert it, because socket state has no lock.
struct ServerSocketIO: SocketIO {
    unowned let core: ServerCore

    @discardableResult func send(_ frame: OutboundFrame, to socket: SocketID) -> Bool {
        assert(core.loop.isOnLoop, "SocketIO used off the service thread")
        return core.send(frame, to: socket)
    }

    @discardableResult func send(_ frames: [OutboundFrame], to socket: SocketID) -> Int {
        assert(core.loop.isOnLoop, "SocketIO used off the service thread")
        return core.send(frames, to: socket)
    }

    func close(_ socket: SocketID, code: Int, reason: String) {
        assert(core.loop.isOnLoop, "SocketIO used off the service thread")
        core.close(socket, code: code, reason: reason)
    }

    func isOpen(_ socket: SocketID) -> Bool {
        assert(core.loop.isOnLoop, "SocketIO used off the service thread")
        return core.sockets[socket]?.isOpen ?? false
    }

    func queuedBytes(_ socket: SocketID) -> Int {
        assert(core.loop.isOnLoop, "SocketIO used off the service thread")
        return core.sockets[socket]?.queuedBytes ?? 0
    }
}
