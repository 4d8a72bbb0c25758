import CWebSockets

/// Server WebSockets: upgrade, receive, the write loop, closing, and the delegate calls.
extension ServerCore {
    /// `HTTP_CONFIRM_UPGRADE` (`user` is nil here): only WebSocket upgrades on configured paths.
    ///
    /// Any other `Upgrade: websocket` or `h2c` is served as the plain HTTP/1.1 request it also is
    /// (a server may ignore `Upgrade`, RFC 9110 §7.8): `curl --http2` and Java's `HttpClient` ask
    /// for `h2c` on every plain-HTTP request, and hanging up left them with no answer at all. lws
    /// 4.1 has no way to say "no upgrade" (non-zero here means "hang up" or "answered already"),
    /// and it compares this very buffer with "websocket" and "h2c" right after the callback
    /// (`lws_handshake_server`): spoiling its first byte makes it take the request as HTTP, which
    /// then reaches `LWS_CALLBACK_HTTP` like any other (a WebSocket path so asked is a 404, a
    /// draining server's answer is 503 `shutting_down`). Any other upgrade name lws has refused
    /// with 403 already before asking: hang up.
    func confirmUpgrade(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let input else { return -1 }
        // `in` is a NUL-terminated upgrade name; `len` is not set for this reason.
        let name = input.assumingMemoryBound(to: CChar.self)
        let kind = String(cString: name).lowercased()
        if kind == "websocket", !isShuttingDown, let path = LwsRequestReader.getPath(wsi),
            configuration.webSocketPaths.contains(path)
        {
            // An upgrade lws would drop without a word gets a 400 that says why (below).
            guard let refusal = Self.upgradeRefusal(wsi) else { return 0 }
            refusedUpgrade = (wsi, refusal)
            name[0] = CChar(UInt8(ascii: "-"))
            return 0
        }
        guard kind == "websocket" || kind == "h2c" else { return -1 }  // lws hangs up
        if kind == "websocket", isShuttingDown { refusedUpgrade = (wsi, .shuttingDown) }
        name[0] = CChar(UInt8(ascii: "-"))
        return 0
    }

    /// Why lws would refuse this WebSocket upgrade, which it does by closing the connection with
    /// no answer and no log line (measured against lws 4.1.6): no `Sec-WebSocket-Key`, or a
    /// `Sec-WebSocket-Protocol` list without `waybill` (RFC 6455 §4.2.2 lets the server answer
    /// without one, and lws hangs up instead). A client then saw a dropped connection and nothing
    /// to go on. Refused here, the request goes on as plain HTTP and gets a 400 naming the
    /// problem (`httpRequestStarted`). Other versions than 13 lws accepts (8 too), and so does
    /// Waybill.
    static func upgradeRefusal(_ wsi: OpaquePointer) -> UpgradeRefusal? {
        guard lws_hdr_total_length(wsi, WSI_TOKEN_KEY) > 0 else { return .noKey }
        if let offered = LwsRequestReader.header(wsi, WSI_TOKEN_PROTOCOL) {
            // Each name without the blanks around it (a name with one inside is no token, and not
            // `waybill`), byte for byte, as lws compares.
            let offersOurs = offered.split(separator: ",").contains { name in
                withoutBlanksAround(name.utf8).elementsEqual(webSocketProtocol.utf8)
            }
            if !offersOurs { return .noSharedSubprotocol }
        }
        return nil
    }

    /// The one subprotocol the server speaks (the name lws is given).
    static let webSocketProtocol = "waybill"

    /// `FILTER_PROTOCOL_CONNECTION`: headers are still readable; copy them into the socket object.
    func filterWebSocket(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> Int32 {
        guard !isShuttingDown else { return -1 }
        var request = LwsRequestReader.request(wsi, remoteAddress: remoteAddress(wsi))
        request.method = "GET"
        if let path = LwsRequestReader.getPath(wsi) { request.path = path }
        let connection = WebSocketConnection(
            id: SocketID(makeID()), wsi: wsi, request: request, counter: counter,
            maxMessageBytes: configuration.maxMessageBytes)
        attach(connection, to: user)
        return 0
    }

    func webSocketEstablished(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> Int32 {
        guard let connection = slotObject(user) as? WebSocketConnection, let request = connection.request else {
            return -1
        }
        connection.request = nil  // keep idle sockets small
        connection.wasOpened = true
        connectionIsBusy(wsi)  // upgraded on a kept-alive connection
        sockets[connection.id] = connection
        heartbeat.add(connection.id)
        delegate?.socketOpened(connection.id, request: request, io: io)
        return 0
    }

    /// A chunk of a message: reassemble, enforce `maxMessageBytes`, deliver complete messages.
    func webSocketReceived(
        _ wsi: OpaquePointer,
        _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        // Once the server has decided to close, the peer's further messages are not delivered.
        guard let connection = slotObject(user) as? WebSocketConnection, connection.isOpen else { return 0 }
        let piece = UnsafeRawBufferPointer(start: length > 0 ? input : nil, count: length)
        let endsFrame = lws_remaining_packet_payload(wsi) == 0
        let isLast = lws_is_final_fragment(wsi) != 0 && endsFrame
        let outcome = connection.inbound.receive(
            piece, isBinary: lws_frame_is_binary(wsi) != 0, endsFrame: endsFrame, isLast: isLast)
        if let (code, reason) = outcome.refusal { return refuse(connection, wsi, code: code, reason: reason) }
        // A message proves the peer alive as a pong does. Behind a proxy the kernel's figures
        // describe the proxy's side, and a slow link's pong may wait behind a replay there; the
        // clients' own pings (every 25–30 s) still come through.
        if case .complete = outcome { heartbeat.pongReceived(from: connection.id) }
        switch outcome {
        case .complete(.binary(let message)): delegate?.socketReceived(connection.id, binary: message, io: io)
        case .complete(.text(let message)): delegate?.socketReceived(connection.id, text: message, io: io)
        default: break  // more pieces follow (a refusal returned above)
        }
        return 0
    }

    /// Pongs a peer may send between two of the heartbeat's pings: one answers the ping, the rest
    /// are unsolicited (RFC 6455 allows them as a one-way heartbeat): 100, or four a second of a
    /// longer interval (a client that sends one a second stays within it at any `--ping-interval`).
    static func maxPongs(perPing interval: Duration) -> UInt16 {
        UInt16(clamping: max(100, 4 * Int((interval / .seconds(1)).rounded(.up))))
    }

    /// `RECEIVE_PONG`: the peer answered a ping. Control frames never reach the hub's frame budget,
    /// so a stream of pongs (6 bytes and a callback each) kept the service thread busy for every
    /// socket (found by a review): past `maxPongsPerPing` the socket is closed with 1008. Pings
    /// are lws's own (it answers them without a callback, one pong pending at a time) and empty
    /// pongs are not reported, so each of those costs lws's parsing only.
    func webSocketPongReceived(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> Int32 {
        guard let connection = slotObject(user) as? WebSocketConnection else { return 0 }
        heartbeat.pongReceived(from: connection.id)
        guard connection.isOpen else { return 0 }
        // Counted only up to the bound: at a bound of `UInt16.max` (a ping interval of 4.5 hours
        // or more, possible through the library's configuration) the next pong trapped on the
        // increment (found by a review, 2026-12-07).
        guard connection.pongsSincePing >= maxPongsPerPing else {
            connection.pongsSincePing += 1
            return 0
        }
        return refuse(connection, wsi, code: 1008, reason: "too many pongs")
    }

    /// Closes a peer that broke a rule from inside its receive callback: nothing more is queued,
    /// and lws closes with `code` when the callback returns the -1 this answers.
    ///
    /// Unless lws still holds a tail of an earlier write: closing then, lws flushes the tail and
    /// drops the connection without the close frame, so the peer saw 1006 instead of the code that
    /// names its fault (found by a review, 2026-12-07). The close then waits for the tail in
    /// `WRITEABLE`, as a close the hub asks for does, within the same 5 s deadline, reading nothing
    /// meanwhile (`closeFromWriteable`).
    private func refuse(_ connection: WebSocketConnection, _ wsi: OpaquePointer, code: Int, reason: String) -> Int32 {
        connection.dropQueue()
        connection.requestClose(code: code, reason: reason)
        if lws_partial_buffered(wsi) != 0 {
            closeFromWriteable(connection, within: 5)
            return 0
        }
        connection.closeSent = true
        closeNow(wsi, code: code, reason: reason)
        return -1
    }

    /// Sets the close code and reason lws sends when the callback returns -1. WS wsis only.
    func closeNow(_ wsi: OpaquePointer, code: Int, reason: String) { setLwsCloseReason(wsi, code: code, reason: reason) }

    /// `WS_PEER_INITIATED_CLOSE`: `input` holds the peer's 2-byte code (big-endian) and reason.
    func webSocketPeerClosing(_ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?, _ length: Int) {
        guard let connection = slotObject(user) as? WebSocketConnection, connection.closeCode == nil else { return }
        if let input, length >= 2 {
            let bytes = input.assumingMemoryBound(to: UInt8.self)
            connection.closeCode = Int(bytes[0]) << 8 | Int(bytes[1])
        } else {
            connection.closeCode = 1005  // close frame without a code
        }
        connection.initiatedByServer = false
        connection.peerIsClosing = true
    }

    /// The socket is gone (from `detach`): report `socketClosed` once if `socketOpened` was reported.
    func webSocketFinished(_ connection: WebSocketConnection) {
        guard !connection.isFinished else { return }
        connection.isFinished = true
        connection.dropQueue()
        connection.inbound.reset()
        guard connection.wasOpened else { return }
        sockets[connection.id] = nil
        heartbeat.remove(connection.id)
        delegate?.socketClosed(connection.id, close: connection.closeReport, io: io)
    }

    // MARK: SocketIO operations

    func close(_ id: SocketID, code: Int, reason: String) {
        guard let connection = sockets[id], connection.isOpen else { return }
        connection.requestClose(code: code, reason: reason)
        closeFromWriteable(connection, within: 5)
    }

    /// After `requestClose`: the close frame goes from `WRITEABLE` once the queue and any tail lws
    /// holds are out (`webSocketWriteable`), or lws drops the connection without one after
    /// `seconds` (a peer that never reads again).
    ///
    /// Meanwhile the peer is not read (`webSocketWriteable` reads again as the close frame goes, so
    /// that lws takes the peer's answer at once). Nothing the peer sends now would be delivered
    /// (`isOpen` is false), but lws would still parse it on the service thread: a peer that keeps
    /// its window shut, so that the close waits for the tail lws holds, and floods frames or pongs
    /// meanwhile, cost that thread for the whole wait, on every connection it opens (found by a
    /// review, 2026-12-07).
    func closeFromWriteable(_ connection: WebSocketConnection, within seconds: Int32) {
        if !connection.isReadingPaused {
            connection.isReadingPaused = true
            lws_rx_flow_control(connection.wsi, 0)
        }
        lws_callback_on_writable(connection.wsi)
        lws_set_timeout(connection.wsi, Self.closeDeadlineReason, seconds)
    }

    static let closeDeadlineReason = pending_timeout(rawValue: PENDING_TIMEOUT_USER_REASON_BASE.rawValue + 1)
}
