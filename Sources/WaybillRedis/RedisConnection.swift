import CHiredis
import WaybillBroker

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One hiredis context, owned by exactly one thread (a context has no locking, notes §1); freed in `deinit`.
///
/// Every failing call throws and leaves the connection **dead**: hiredis's `err` is sticky, so after a
/// NULL reply every later call on the context fails at once (notes §7, §8). The owner drops it and
/// connects again.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    private let url: RedisURL

    /// Connects, sets the socket timeouts, and `SELECT`s the database if it is not 0.
    ///
    /// - `connectTimeout` bounds the TCP connect only: a down port is refused in 0.1 ms, a blackholed
    ///   host times out after exactly this long (notes §8).
    /// - `commandTimeout` bounds every later blocking read or write (`redisSetTimeout`). A frozen
    ///   Redis still completes the handshake, and without it PUBLISH blocked for more than 3 s (notes §8).
    /// - Throws: `BrokerError` naming the server and hiredis's reason.
    init(_ url: RedisURL, connectTimeout: Duration, commandTimeout: Duration) throws(BrokerError) {
        self.url = url
        guard let context = redisConnectWithTimeout(url.host, Int32(url.port), connectTimeout.asTimeval) else {
            throw BrokerError("cannot connect to \(url): out of memory")
        }
        guard context.pointee.err == 0 else {
            let reason = Self.errorText(context)
            redisFree(context)
            throw BrokerError("cannot connect to \(url): \(reason)")
        }
        self.context = context
        guard redisSetTimeout(context, commandTimeout.asTimeval) == REDIS_OK else {
            throw BrokerError("cannot set timeouts on \(url): \(Self.errorText(context))")
        }
        // TCP keepalive probes keep a NAT or firewall from forgetting an idle connection (best
        // effort: a failure here leaves a connection that works, only without the probes).
        _ = redisEnableKeepAlive(context)
        if url.database != 0 {
            let reply = try command(["SELECT", String(url.database)].map { Array($0.utf8) })
            if case .error(let message) = reply { throw BrokerError("redis SELECT \(url.database): \(message)") }
        }
    }

    deinit { redisFree(context) }

    /// The socket, for `poll` (owned by the context: never close it).
    var fileDescriptor: Int32 { context.pointee.fd }

    /// Sends a command and waits for its reply (bounded by `commandTimeout` per read and write).
    /// An error reply (`-ERR …`) is returned, not thrown: the connection is still good.
    /// - Throws: `BrokerError` when the connection failed (it is dead now).
    func command(_ arguments: [[UInt8]]) throws(BrokerError) -> RedisReply {
        let raw = Self.withArgv(arguments) { argc, argv, lengths in redisCommandArgv(context, argc, argv, lengths) }
        guard let raw else { throw failure("command failed") }
        defer { freeReplyObject(raw) }
        return RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self))
    }

    /// Queues a command in the output buffer without sending it (see `flush`).
    func append(_ arguments: [[UInt8]]) throws(BrokerError) {
        let status = Self.withArgv(arguments) { argc, argv, lengths in
            redisAppendCommandArgv(context, argc, argv, lengths)
        }
        guard status == REDIS_OK else { throw failure("cannot queue command") }
    }

    /// Writes the whole output buffer (blocking, bounded by `commandTimeout` per write).
    func flush() throws(BrokerError) {
        var done: Int32 = 0
        while done == 0 {
            guard redisBufferWrite(context, &done) == REDIS_OK else { throw failure("write failed") }
        }
    }

    /// Reads what the socket has into the reply reader. Call it only when `poll` reported the socket
    /// readable, so it does not block. EOF is an error: the server closed the connection.
    func readAvailable() throws(BrokerError) {
        guard redisBufferRead(context) == REDIS_OK else { throw failure("read failed") }
    }

    /// The next complete reply already read from the socket, or nil; never touches the socket.
    func bufferedReply() throws(BrokerError) -> RedisReply? {
        var raw: UnsafeMutableRawPointer?
        guard redisGetReplyFromReader(context, &raw) == REDIS_OK else { throw failure("protocol error") }
        guard let raw else { return nil }
        defer { freeReplyObject(raw) }
        return RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self))
    }

    // MARK: Helpers

    private func failure(_ what: String) -> BrokerError {
        BrokerError("redis \(url): \(what): \(Self.errorText(context))")
    }

    /// hiredis's `errstr` (a fixed 128-byte buffer in the context), or a generic text.
    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        let text = withUnsafeBytes(of: context.pointee.errstr) { raw -> String in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        return text.isEmpty ? "error \(context.pointee.err)" : text
    }

    /// Calls `body` with C views of `arguments`: binary-safe, with explicit lengths (payloads may hold
    /// NUL, spaces and newlines; the variadic `redisCommand` is not importable anyway).
    private static func withArgv<R>(
        _ arguments: [[UInt8]],
        _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
    ) -> R {
        let buffers = arguments.map { argument -> UnsafeMutablePointer<CChar> in
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(argument.count, 1))
            argument.withUnsafeBytes { raw in
                if let base = raw.baseAddress {
                    UnsafeMutableRawPointer(buffer).copyMemory(from: base, byteCount: raw.count)
                }
            }
            return buffer
        }
        defer { buffers.forEach { $0.deallocate() } }
        var argv = buffers.map { UnsafePointer<CChar>?(UnsafePointer($0)) }
        let lengths = arguments.map(\.count)
        return argv.withUnsafeMutableBufferPointer { argvBuffer in
            lengths.withUnsafeBufferPointer { lengthBuffer in
                body(Int32(arguments.count), argvBuffer.baseAddress!, lengthBuffer.baseAddress!)
            }
        }
    }
}
