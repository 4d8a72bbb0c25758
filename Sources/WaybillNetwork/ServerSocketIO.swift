/// `SocketIO` for delegate calls and `execute` bodies: a thin view of `ServerCore`'s sockets.
struct ServerSocketIO: SocketIO {
    unowned let core: ServerCore

    @discardableResult func send(_ frame: OutboundFrame, to socket: SocketID) -> Bool { core.send(frame, to: socket) }
    func close(_ socket: SocketID, code: Int, reason: String) { core.close(socket, code: code, reason: reason) }
    func isOpen(_ socket: SocketID) -> Bool { core.sockets[socket]?.isOpen ?? false }
    func queuedBytes(_ socket: SocketID) -> Int { core.sockets[socket]?.queuedBytes ?? 0 }
}
