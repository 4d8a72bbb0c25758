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
        (fd, port) = try openLoopbackListener()
    }

    deinit { close() }

    /// Stops listening (idempotent); pending connections are reset.
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
