import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A listening TCP socket on 127.0.0.1, on a free port: for test servers that stand in for a
/// peer (`SilentListener`, a Redis look-alike).
/// - Returns: the descriptor, which the caller closes, and the port.
/// - Throws: `RawConnectionError.connectFailed` with the errno if the socket cannot listen.
/// `listening: false` only binds it (`RefusingPort`).
public func openLoopbackListener(backlog: Int32 = 16, listening: Bool = true) throws -> (descriptor: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw RawConnectionError.connectFailed(errno) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && (!listening || listen(fd, backlog) == 0) && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else {
        let code = errno
        close(fd)
        throw RawConnectionError.connectFailed(code)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// Whether a connect to 127.0.0.1:`port` is refused by the kernel (nothing listens there): how a
/// test sees that a stopping server has closed its listening socket.
public func connectIsRefused(port: Int) async -> Bool {
    do {
        try await runBlocking { try RawConnection(port: port, timeout: .seconds(2)).close() }
        return false
    } catch RawConnectionError.connectFailed(let code) where code == ECONNREFUSED {
        return true
    } catch {
        return false
    }
}

/// A port on 127.0.0.1 that refuses every connection: bound but not listening, so it stays this
/// test's while held (a port found free and let go may be another test's by the time it is used).
// @unchecked: `fd` only changes in `close`, called by the one owner.
public final class RefusingPort: @unchecked Sendable {
    private var fd: Int32
    public let port: Int

    public init() throws {
        (fd, port) = try openLoopbackListener(listening: false)
    }

    deinit { close() }

    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
