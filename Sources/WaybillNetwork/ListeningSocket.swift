import CWebSockets
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The server's listening socket, opened here rather than by lws, which is given each accepted
/// connection (`ServerCore.acceptConnections`).
///
/// Why: a node that stops (SIGTERM, a deploy) must refuse new connections at once, so that a
/// proxy in front sends them to another node (nginx retries a refused connect on the next server,
/// a write included, since nothing was sent). lws 4.1 closes its own listener only through
/// `lws_context_deprecate`, which crashed a test program here (and raises SIGINT in the process
/// once the context is idle). Accepting and closing instead, as before, made nginx answer 502 for
/// the writes it had sent on such a connection (docs/HARDENING.md).
struct ListeningSocket {
    let descriptor: Int32
    /// The bound port (the kernel's choice for port 0).
    let port: Int

    /// Binds and listens, non-blocking. `host`: an address literal, `localhost`, or `0.0.0.0`
    /// (also `*` or empty) for every interface, IPv6 too where the machine has it (as lws did).
    /// - Throws: `ListenError` with the reason (the port taken, an address not on this machine).
    static func open(host: String, port: Int) throws(ListenError) -> ListeningSocket {
        guard (0...65_535).contains(port) else { throw ListenError("port \(port) is out of range") }
        switch host {
        case "", "0.0.0.0", "*":
            // Dual stack, as lws bound it; only a machine without IPv6 gets IPv4 alone (any other
            // failure, the port taken included, is the answer).
            do {
                return try bind(family: AF_INET6, address: "::", port: port, v6Only: false)
            } catch where error.code == EAFNOSUPPORT {
                return try bind(family: AF_INET, address: "0.0.0.0", port: port, v6Only: nil)
            }
        case "localhost":
            return try bind(family: AF_INET, address: "127.0.0.1", port: port, v6Only: nil)
        default:
            var v4 = in_addr()
            var v6 = in6_addr()
            if inet_pton(AF_INET, host, &v4) == 1 {
                return try bind(family: AF_INET, address: host, port: port, v6Only: nil)
            }
            if inet_pton(AF_INET6, host, &v6) == 1 {
                // The system's default (dual stack on Linux), as lws left it: `::` takes IPv4 too.
                return try bind(family: AF_INET6, address: host, port: port, v6Only: nil)
            }
            throw ListenError("\(host) is not an address literal (or localhost, or 0.0.0.0)")
        }
    }

    /// `v6Only`: `IPV6_V6ONLY` for an IPv6 socket, `nil` leaves the system's default.
    private static func bind(family: Int32, address: String, port: Int, v6Only: Bool?) throws(ListenError) -> ListeningSocket {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let code = errno
            throw ListenError("socket: \(Self.reason(code))", code: code)
        }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        // A restarted node binds again while its old connections sit in TIME_WAIT.
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size)
        if family == AF_INET6, let v6Only {
            var value: Int32 = v6Only ? 1 : 0
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &value, size)
        }
        var storage = sockaddr_storage()
        let length: socklen_t
        if family == AF_INET {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = in_port_t(UInt16(port).bigEndian)
            _ = inet_pton(AF_INET, address, &sin.sin_addr)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin, as: sockaddr_in.self) }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = in_port_t(UInt16(port).bigEndian)
            _ = inet_pton(AF_INET6, address, &sin6.sin6_addr)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin6, as: sockaddr_in6.self) }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, SOMAXCONN) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw ListenError(Self.reason(code), code: code)
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        guard named == 0 else {
            let reason = Self.reason(errno)
            Glibc.close(fd)
            throw ListenError(reason)
        }
        let boundPort = withUnsafeBytes(of: &actual) { raw -> UInt16 in
            family == AF_INET
                ? UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
                : UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
        }
        return ListeningSocket(descriptor: fd, port: Int(boundPort))
    }

    static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}

/// Why the listening socket could not be opened.
struct ListenError: Error, CustomStringConvertible {
    let description: String
    /// The `errno` behind it, if a call failed.
    let code: Int32
    init(_ description: String, code: Int32 = 0) {
        self.description = description
        self.code = code
    }
}

/// One descriptor held back for the moment the process runs out: `accept` then fails with
/// `EMFILE` and leaves the connection queued, so a level-triggered loop would wake for it again at
/// once, for ever. With this one freed, the connection is accepted and closed at once (the client
/// sees its connection end and backs off), and the descriptor is taken back. The classic remedy
/// (libev's documentation names it); lws 4.1's own accept only logs the error and spins.
struct SpareDescriptor {
    private var fd: Int32 = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)

    /// Accepts one queued connection on `listener` and closes it, if the spare could be freed.
    /// Returns whether one was taken off the queue.
    mutating func shedOne(from listener: Int32) -> Bool {
        guard fd >= 0 else {
            fd = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)  // freed by a connection since
            return false
        }
        Glibc.close(fd)
        let accepted = lwsx_accept(listener)
        if accepted >= 0 { Glibc.close(accepted) }
        fd = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
        return accepted >= 0
    }

    mutating func release() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
