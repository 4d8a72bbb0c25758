import CWebSockets

/// Sets the close code and reason lws sends when the callback returns -1, for a server or a client
/// WebSocket wsi. A close frame's reason holds at most 123 bytes (125 with the code).
func setLwsCloseReason(_ wsi: OpaquePointer, code: Int, reason: String) {
    var bytes = Array(reason.utf8.prefix(123))
    bytes.withUnsafeMutableBufferPointer { b in
        lws_close_reason(wsi, lws_close_status(rawValue: UInt32(code)), b.baseAddress, b.count)
    }
}
