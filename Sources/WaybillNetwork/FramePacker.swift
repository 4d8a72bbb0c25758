import CWebSockets

/// Packs whole server-to-client WebSocket frames back to back into one reusable buffer, so that several
/// frames queued for one socket leave in one `send()` instead of one each.
///
/// A server frame is not masked and Waybill negotiates no extension, so a frame is just its RFC 6455
/// header (2, 4 or 10 bytes) followed by the payload. lws passes bytes written as `LWS_WRITE_HTTP` on a
/// WebSocket straight to the socket (its "raw" path), buffering any unsent tail itself, so the buffer
/// can be reused as soon as `lws_write` returns. One packer per server; service thread only.
final class FramePacker {
    /// Most bytes one pack holds (frames that do not fit wait for the next pack).
    let capacity: Int
    /// Headroom first (lws does not need it on the raw path, but costs nothing), then the frames.
    private let base: UnsafeMutablePointer<UInt8>
    private let headroom = lwsx_pre()
    /// Bytes packed so far.
    private(set) var count = 0
    /// Frames packed so far.
    private(set) var frameCount = 0

    /// The server's packer size: big enough that a burst of small events to one socket is one pack.
    static let defaultCapacity = 64 << 10

    init(capacity: Int = defaultCapacity) {
        self.capacity = capacity
        base = .allocate(capacity: headroom + capacity)
    }

    deinit { base.deallocate() }

    /// The packed bytes (valid until the next `append` or `reset`).
    var bytes: UnsafeMutablePointer<UInt8> { base + headroom }

    /// Header size for a payload of `length` bytes (RFC 6455 §5.2).
    static func headerLength(payload length: Int) -> Int {
        length < 126 ? 2 : (length < 65_536 ? 4 : 10)
    }

    /// Whether a frame with a payload of `length` bytes would fit in an empty packer.
    func canHold(payload length: Int) -> Bool {
        Self.headerLength(payload: length) + length <= capacity
    }

    /// Appends `frame` (a final, unmasked text or binary frame) if it fits; returns whether it did.
    func append(_ frame: OutboundFrame) -> Bool {
        let length = frame.count
        let header = Self.headerLength(payload: length)
        guard count + header + length <= capacity else { return false }
        var p = bytes + count
        p[0] = 0x80 | (frame.isBinary ? 0x2 : 0x1)  // FIN + opcode
        switch header {
        case 2:
            p[1] = UInt8(length)
        case 4:
            p[1] = 126
            p[2] = UInt8(truncatingIfNeeded: length >> 8)
            p[3] = UInt8(truncatingIfNeeded: length)
        default:
            p[1] = 127
            for i in 0..<8 { p[2 + i] = UInt8(truncatingIfNeeded: length >> (56 - 8 * i)) }
        }
        p += header
        p.update(from: frame.storage.payload, count: length)
        count += header + length
        frameCount += 1
        return true
    }

    /// Empties the packer (keeps the buffer).
    func reset() {
        count = 0
        frameCount = 0
    }

    /// A copy of the packed bytes (tests).
    var packed: [UInt8] { Array(UnsafeBufferPointer(start: bytes, count: count)) }
}
