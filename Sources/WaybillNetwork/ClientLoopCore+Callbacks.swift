import CWebSockets

/// The client loop's lws callback: handshake headers, receive, the write loop, and the end.
extension ClientLoopCore {
    func handle(
        _ wsi: OpaquePointer,
        _ reason: lws_callback_reasons,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
            loop.drainInbox()
            return 0  // never non-zero: that would close the wake-up pipe
        }
        guard let raw = lws_get_opaque_user_data(wsi) else { return 0 }
        let connection = Unmanaged<ClientConnection>.fromOpaque(raw).takeUnretainedValue()
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            return appendHeaders(connection, wsi, input, length)
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            connection.state = .open
            connection.resumeConnect(.success(()))
            if !connection.queue.isEmpty || connection.pendingClose != nil { lws_callback_on_writable(wsi) }
        case LWS_CALLBACK_CLIENT_RECEIVE:
            return received(connection, wsi, input, length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeable(connection, wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let input, length >= 2 {
                let bytes = UnsafeRawBufferPointer(start: input, count: length)
                connection.closeCode = Int(bytes[0]) << 8 | Int(bytes[1])
                connection.closeReason = String(decoding: bytes[2...], as: UTF8.self)
            } else {
                connection.closeCode = 1005
            }
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let text = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection error"
            end(connection, wsi, WebSocketClientError(.connectFailed, text))
        case LWS_CALLBACK_CLIENT_CLOSED, LWS_CALLBACK_WSI_DESTROY:
            end(connection, wsi, WebSocketClientError(.connectFailed, "closed during the handshake"))
        default:
            break
        }
        return 0
    }

    private func end(_ connection: ClientConnection, _ wsi: OpaquePointer, _ error: WebSocketClientError) {
        lws_set_opaque_user_data(wsi, nil)
        connection.wsi = nil
        connection.finish(error: error)
        connections[ObjectIdentifier(connection)] = nil
    }

    private func appendHeaders(
        _ connection: ClientConnection,
        _ wsi: OpaquePointer,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        guard let input else { return 0 }
        let p = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        guard let start = p.pointee else { return 0 }
        let end = start + length
        for (name, value) in connection.headers {
            let ok = Array((name.lowercased() + ":").utf8 + [0]).withUnsafeBufferPointer { n in
                Array(value.utf8 + [0]).withUnsafeBufferPointer { v in
                    lws_add_http_header_by_name(wsi, n.baseAddress, v.baseAddress, Int32(v.count - 1), p, end) == 0
                }
            }
            if !ok { return -1 }
        }
        return 0
    }

    private func received(
        _ connection: ClientConnection,
        _ wsi: OpaquePointer,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        let piece = UnsafeRawBufferPointer(start: length > 0 ? input : nil, count: length)
        let endsFrame = lws_remaining_packet_payload(wsi) == 0
        let isLast = lws_is_final_fragment(wsi) != 0 && endsFrame
        let outcome = connection.inbound.receive(
            piece, isBinary: lws_frame_is_binary(wsi) != 0, endsFrame: endsFrame, isLast: isLast)
        if let (code, reason) = outcome.refusal {
            // The server sent more than this client takes in one message (1009), or one message in
            // more frames than it accepts (1008): close.
            connection.queue = []
            return close(connection, wsi, code: code, reason: reason)
        }
        switch outcome {
        case .complete(.binary(let message)): connection.events.yield(.binary(message))
        case .complete(.text(let message)): connection.events.yield(.text(message))
        default: break  // more pieces follow (a refusal returned above)
        }
        return 0
    }

    private func writeable(_ connection: ClientConnection, _ wsi: OpaquePointer) -> Int32 {
        guard !connection.closeSent else { return 0 }
        while !connection.queue.isEmpty && lws_send_pipe_choked(wsi) == 0 {
            let frame = connection.queue.removeFirst()
            let kind = frame.isBinary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT
            if lws_write(wsi, frame.storage.payload, frame.count, kind) < frame.count { return -1 }
        }
        if !connection.queue.isEmpty {
            lws_callback_on_writable(wsi)
            return 0
        }
        if let pending = connection.pendingClose {
            return close(connection, wsi, code: pending.code, reason: pending.reason)
        }
        return 0
    }

    /// Closes with `code` and `reason` (the callback's -1), remembering both for the close event.
    private func close(_ connection: ClientConnection, _ wsi: OpaquePointer, code: Int, reason: String) -> Int32 {
        connection.closeSent = true
        connection.closeCode = code
        connection.closeReason = reason
        setLwsCloseReason(wsi, code: code, reason: reason)
        return -1
    }
}

/// The client context's lws callback: a trampoline to its `ClientLoopCore`.
func clientCallback(
    _ wsi: OpaquePointer?,
    _ reason: lws_callback_reasons,
    _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?,
    _ length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let owner = lws_context_user(context) else { return 0 }
    return Unmanaged<ClientLoopCore>.fromOpaque(owner).takeUnretainedValue().handle(wsi, reason, input, length)
}
