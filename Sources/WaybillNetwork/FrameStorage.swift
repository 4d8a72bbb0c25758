import CWebSockets

/// The payload of an `OutboundFrame`, allocated once with lws's `LWS_PRE` headroom in front of it.
///
/// lws writes the WebSocket frame header into the headroom on every `lws_write`. Many sockets share
/// one storage, and that scribbling is safe because every write happens on the one service thread,
/// one after another, and only touches the headroom, never the payload.
// @unchecked: the payload is immutable after init; the headroom is written only on the service thread.
final class FrameStorage: @unchecked Sendable {
    /// Start of the allocation (headroom first).
    private let base: UnsafeMutableRawPointer
    /// Payload length in bytes.
    let count: Int
    static let headroom = lwsx_pre()

    init(_ bytes: some Collection<UInt8>) {
        count = bytes.count
        // At least one payload byte so an empty message still has a valid pointer.
        base = UnsafeMutableRawPointer.allocate(byteCount: Self.headroom + max(count, 1), alignment: 16)
        let payload = UnsafeMutableRawBufferPointer(start: base + Self.headroom, count: count)
        payload.copyBytes(from: bytes)
    }

    deinit { base.deallocate() }

    /// Where the payload starts; `headroom` writable bytes precede it. Service thread only.
    var payload: UnsafeMutablePointer<UInt8> {
        (base + Self.headroom).assumingMemoryBound(to: UInt8.self)
    }

    /// A copy of the payload (tests, diagnostics).
    var bytes: [UInt8] { Array(UnsafeRawBufferPointer(start: base + Self.headroom, count: count)) }
}
