import Foundation

/// A minimal WebSocket client side on a `RawConnection`: handshake, masked frames out, frames in.
///
/// It answers nothing by itself (no automatic pongs), which is the point: tests use it to play
/// half-open and slow peers.
extension RawConnection {
    /// Sends an upgrade request for `target` (path and query) and reads the response.
    /// - Returns: the response (101 on success); frames may follow.
    public func upgradeToWebSocket(_ target: String, headers: [(String, String)] = []) throws -> RawHTTPResponse {
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let upgrade: [(String, String)] =
            [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", key),
                ("Sec-WebSocket-Version", "13"),
            ] + headers
        try send(Self.request("GET", target, headers: upgrade))
        return try readResponse()
    }

    /// Sends one masked frame.
    /// - Parameters:
    ///   - fin: false for every fragment but the last.
    public func sendFrame(_ opcode: RawWebSocketFrame.Opcode, _ payload: [UInt8], fin: Bool = true) throws {
        try send(Self.maskedFrame(opcode, payload, fin: fin))
    }

    /// One masked frame's bytes (to send many in one write).
    public static func maskedFrame(_ opcode: RawWebSocketFrame.Opcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode.rawValue]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count < 65536 {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return frame
    }

    /// Sends a text message in one frame.
    public func sendText(_ text: String) throws { try sendFrame(.text, Array(text.utf8)) }

    /// Sends a close frame with `code` and `reason`.
    public func sendClose(code: Int, reason: String = "") throws {
        try sendFrame(.close, [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8))
    }

    /// Reads one frame (server frames are not masked; a masked one is unmasked anyway).
    public func readFrame() throws -> RawWebSocketFrame {
        let head = try readBytes(2)
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            let b = try readBytes(2)
            length = Int(b[0]) << 8 | Int(b[1])
        } else if length == 127 {
            length = try readBytes(8).reduce(0) { $0 << 8 | Int($1) }
        }
        let mask = head[1] & 0x80 != 0 ? try readBytes(4) : nil
        var payload = try readBytes(length)
        if let mask { payload = payload.enumerated().map { $0.element ^ mask[$0.offset % 4] } }
        return RawWebSocketFrame(
            fin: head[0] & 0x80 != 0,
            opcode: RawWebSocketFrame.Opcode(rawValue: head[0] & 0x0F) ?? .unknown,
            payload: payload
        )
    }

    /// Reads frames until a data or close frame, answering each ping before it with a pong (a live
    /// but slow peer). Returns the frame and the pings answered.
    public func readAnsweringPings() throws -> (frame: RawWebSocketFrame, pings: Int) {
        var pings = 0
        while true {
            let frame = try readFrame()
            switch frame.opcode {
            case .ping:
                try sendFrame(.pong, frame.payload)
                pings += 1
            case .pong: continue
            default: return (frame, pings)
            }
        }
    }

    /// Reads frames until a data or close frame, skipping pings (which it does not answer).
    public func readDataOrCloseFrame() throws -> RawWebSocketFrame {
        while true {
            let frame = try readFrame()
            if frame.opcode != .ping && frame.opcode != .pong { return frame }
        }
    }
}

/// One WebSocket frame as `RawConnection` read it.
public struct RawWebSocketFrame: Sendable, Equatable {
    /// RFC 6455 opcodes.
    public enum Opcode: UInt8, Sendable {
        case continuation = 0
        case text = 1
        case binary = 2
        case close = 8
        case ping = 9
        case pong = 10
        case unknown = 15
    }

    /// Whether this is the last fragment of its message.
    public var fin: Bool
    /// The frame's opcode.
    public var opcode: Opcode
    /// The unmasked payload.
    public var payload: [UInt8]

    /// The payload as UTF-8 text.
    public var text: String { String(decoding: payload, as: UTF8.self) }

    /// For a close frame: the code, if the payload has one.
    public var closeCode: Int? {
        guard opcode == .close, payload.count >= 2 else { return nil }
        return Int(payload[0]) << 8 | Int(payload[1])
    }

    /// For a close frame: the reason text.
    public var closeReason: String { payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : "" }
}
