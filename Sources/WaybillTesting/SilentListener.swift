import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP port on 127.0.0.1 that completes connections (the kernel's backlog) but never reads or
/// answers: for testing connect and handshake timeouts.
// @unchecked: `fd` only changes in `close`, called by the one owner.
public final class SilentListener: @unchecked Sendable {
    private var fd: Int32
    /// The port it listens on.
    public let port: Int

    /// Listens on a free port.
    /// - Throws: `RawConnectionError.connectFailed` with the errno if the socket cannot listen.
    public init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawConnectionError.connectFailed(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let socketFD = fd
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketFD, $0, length) == 0 && listen(socketFD, 16) == 0 && getsockname(socketFD, $0, &length) == 0
            }
        }
        guard ok else {
            let code = errno
            Glibc.close(fd)
            fd = -1  // or deinit closes the number again, maybe another thread's file by then
            throw RawConnectionError.connectFailed(code)
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close() }

    /// Stops listening (idempotent); pending connections are reset.
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
