import CWebSockets
import Foundation

/// HTTP requests: read, frame the body, dispatch to the responder, route the response back.
extension ServerCore {
    private static let bodyMethods: Set<String> = ["POST", "PUT", "PATCH"]

    /// `LWS_CALLBACK_HTTP`: the request line and headers are in.
    func httpRequestStarted(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> Int32 {
        connectionIsBusy(wsi)
        let request = LwsRequestReader.request(wsi, remoteAddress: remoteAddress(wsi))
        let session = HTTPSession(id: makeID(), wsi: wsi, request: request, counter: counter, dispatched: dispatched, scratch: writeScratch)
        session.isHTTP11 = LwsRequestReader.isHTTP11(wsi)
        attach(session, to: user)
        inFlight[session.id] = session

        // The four fields framing and connection handling read, in one pass over the fields (the
        // first of each, as the subscript gives): four subscripts, each scanning the list for a
        // lower-cased key, cost about 0.7 µs per request (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
        var connection: String?, transferEncoding: String?, lengthText: String?, expect: String?
        for (name, value) in request.headers.fields {
            switch name {
            case "connection": if connection == nil { connection = value }
            case "transfer-encoding": if transferEncoding == nil { transferEncoding = value }
            case "content-length": if lengthText == nil { lengthText = value }
            case "expect": if expect == nil { expect = value }
            default: break
            }
        }
        let refusal = refusedUpgrade?.wsi == wsi ? refusedUpgrade?.reason : nil
        refusedUpgrade = nil
        if let message = refusal?.message {
            answerItself(session, .jsonError(status: 400, code: "bad_upgrade", message: message))
            return 0
        }
        let wasRefusedUpgrade = refusal == .shuttingDown
        if isShuttingDown {
            // A request on a connection kept from before: answered while idle connections are
            // kept (a proxy's request on one is served, not lost), then the connection closes. A
            // socket's upgrade is refused: its client reconnects to another node.
            guard answersLateRequests, !wasRefusedUpgrade else {
                answerItself(
                    session, .jsonError(status: 503, code: "shutting_down", message: "The server is shutting down."))
                return 0
            }
            session.closeAfterResponse = true
            session.request.arrivedWhileStopping = true
        }
        // The client asked to close: say so in the response, and close after it.
        if connection?.lowercased() == "close" { session.closeAfterResponse = true }
        // Only a lone `chunked` is read as chunks (RFC 9112 §6.1, §6.3), and only from HTTP/1.1.
        // Any other coding (`gzip`, `identity`, two headers lws joins into a list, `xchunked`) was
        // framed by Content-Length or read as chunks, where a proxy in front that reads the RFC
        // would end the request elsewhere (found by a review, 2026-12-07): refused and closed
        // below, as nginx refuses them.
        let isChunked = transferEncoding != nil
        let unreadableCoding = transferEncoding.map { !Self.isLoneChunked($0) || !session.isHTTP11 } ?? false
        let length = lengthText.flatMap(Self.integer)
        session.bodyLimit = configuration.maxBodyBytes
        if isChunked || (length ?? 0) > HTTPServerConfiguration.bodyBytesAlwaysAllowed,
            let limit = responder.bodyLimit(method: request.method, path: request.path)
        {
            // Never above the server's own limit, which may be set below 16 KiB (4 KiB at least).
            session.bodyLimit = min(max(limit, HTTPServerConfiguration.bodyBytesAlwaysAllowed), configuration.maxBodyBytes)
        }
        // lws itself expects a body for POST/PUT/PATCH without a length, or for any Content-Length > 0.
        let lwsExpectsBody = (length ?? 0) > 0 || (lengthText == nil && Self.bodyMethods.contains(request.method))

        if unreadableCoding {
            answerItself(
                session,
                .jsonError(status: 400, code: "bad_request", message: "Unsupported Transfer-Encoding: only chunked, in HTTP/1.1."))
        } else if lengthText != nil && (length == nil || length! < 0 || isChunked) {
            answerItself(session, .jsonError(status: 400, code: "bad_request", message: "Invalid Content-Length."))
        } else if isChunked {
            guard Self.bodyMethods.contains(request.method) else {
                // lws would parse the chunks as the next request: refuse and close.
                answerItself(
                    session, .jsonError(status: 411, code: "length_required", message: "Chunked body not allowed here."))
                return 0
            }
            session.chunked = ChunkedBodyDecoder(limit: session.bodyLimit)
            session.closeAfterResponse = true  // lws still expects a 100 MB body after the last chunk
        } else if let length, length > session.bodyLimit {
            // Answer at once and close, so lws does not read megabytes for nothing.
            answerItself(session, Self.tooLarge(session.bodyLimit))
        } else if length == 0 && request.method == "POST" {
            // lws delivers HTTP_BODY(0) + BODY_COMPLETION for an explicit zero-length POST only.
            session.state = .readingBody
        } else if !lwsExpectsBody {
            dispatch(session)
        } else if length == nil {
            // A body method without length or chunking has an empty body (RFC 7230 §3.3.3); lws
            // would wait for a 100 MB body, so answer now and close.
            session.closeAfterResponse = true
            dispatch(session)
        }
        // Otherwise Content-Length > 0 (or chunked): wait for HTTP_BODY pieces.
        if session.state == .readingBody, expect?.lowercased() == "100-continue" {
            // lws does not answer Expect itself; curl would wait a second before sending the body.
            session.writeContinue()
        }
        return 0
    }

    /// Whether a Transfer-Encoding value is `chunked` alone: ASCII letters in any case, spaces and
    /// tabs around them, byte for byte. Not Unicode rules: `.whitespaces` trims a no-break space,
    /// `lowercased()` turns the Kelvin sign into `k`, and `String`'s `==` compares canonically, so
    /// values a proxy sees as another coding passed (found by a review, 2026-12-07).
    static func isLoneChunked(_ value: String) -> Bool {
        let bytes = withoutBlanksAround(Substring(value).utf8)
        let word = Array("chunked".utf8)
        guard bytes.count == word.count else { return false }
        return zip(bytes, word).allSatisfy { byte, expected in byte | 0x20 == expected }
    }

    /// `bytes` without the blanks HTTP allows around a value or a list's element (space, tab).
    static func withoutBlanksAround(_ bytes: Substring.UTF8View) -> Substring.UTF8View {
        var bytes = bytes
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        return bytes
    }

    /// `LWS_CALLBACK_HTTP_BODY`: the next raw piece of the body.
    func httpBodyReceived(
        _ wsi: OpaquePointer,
        _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        guard let session = slotObject(user) as? HTTPSession else { return 0 }
        if session.state == .dispatched {
            // Bytes after a body method without a length, read with its head: dropped (the body is
            // empty), but lws counts them against the 100 MB it expects and sets its timeout again.
            restoreHandlerDeadlineAfterThisRead(session)
            return 0
        }
        guard session.state == .readingBody else { return 0 }
        if ContinuousClock.now - session.startedAt > configuration.bodyDeadline {
            session.request.body = []
            session.chunked = nil
            answerItself(
                session, .jsonError(status: 408, code: "request_timeout", message: "The request body took too long to arrive."))
            return 0
        }
        let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
        if session.chunked != nil {
            switch session.chunked!.feed(bytes) {
            case .needMore:
                break
            case .complete:
                session.request.body = session.chunked!.body
                session.chunked = nil
                dispatch(session)
                restoreHandlerDeadlineAfterThisRead(session)
            case .tooLarge:
                session.chunked = nil
                answerItself(session, Self.tooLarge(session.bodyLimit))
            case .malformed:
                session.chunked = nil
                answerItself(session, .jsonError(status: 400, code: "bad_request", message: "Malformed chunked body."))
            }
            return 0
        }
        if session.request.body.count + bytes.count > session.bodyLimit {
            session.request.body = []
            answerItself(session, Self.tooLarge(session.bodyLimit))
            return 0
        }
        session.request.body.append(contentsOf: bytes)
        return 0
    }

    /// `LWS_CALLBACK_HTTP_BODY_COMPLETION`: a Content-Length body is complete.
    func httpBodyCompleted(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> Int32 {
        guard let session = slotObject(user) as? HTTPSession else { return 0 }
        switch session.state {
        case .readingBody:
            guard session.chunked == nil else { return 0 }
            if Self.bodyIsOwnRequestHead(session.request) {
                session.request.body = []
                answerItself(
                    session,
                    .jsonError(
                        status: 400, code: "pipelining_not_supported",
                        message: "Send requests with a body on their own, not pipelined."))
            } else {
                dispatch(session)
            }
            return 0
        case .dispatched:
            // A repeat while the responder runs: bytes of a pipelined request arrived in the same
            // read as this body, and lws 4.1 now spins in `lws_http_action` (BODY_COMPLETION, then
            // LRS_DEFERRING_ACTION, consuming nothing) until the connection closes. The only way
            // out is to close: send this response with `Connection: close` if it is already here,
            // and close; the client retries the rest on a new connection. Not waiting for it: that
            // held the service thread, so every socket of the node, for as long as the handler ran
            // (up to 10 s; a login takes a key stretch), once per such request (found by a review).
            // A slower answer is lost with the connection, as after a network drop: the client
            // retries (writes with their `Idempotency-Key`). Reading is paused while a handler runs,
            // so no test has made lws repeat this; kept as the way out if it does.
            guard let response = session.responseBox.take() else { return -1 }
            session.respond(response, close: true)
            _ = session.writeAllNow()
            sessionFinished(session)
            return -1
        case .responding:
            // A repeat after the response arrived (pipelined bytes buffered from a later read):
            // lws wants the transaction completed inside this callback.
            let result = session.writeAllNow()
            sessionFinished(session)
            return result
        case .finished:
            return -1  // still looping: the response could not complete the transaction
        }
    }

    /// An answer the network layer gives itself, instead of the responder (a framing it refuses, a
    /// body too large or too slow, a stop), closing the connection. Counted for `/metrics`
    /// (`HTTPServer.observeOwnAnswers`): neither the access log nor the request metrics saw these
    /// (a review, 2026-12-07: a flood of 413s left no trace).
    func answerItself(_ session: HTTPSession, _ response: HTTPResponse) {
        ownAnswerObserver?(response.status)
        session.respond(response, close: true)
    }

    /// Sets the handler deadline (`dispatch`) again once lws is done with the current read. After
    /// a body piece lws still expects more (a chunked body, or a body method without a length: it
    /// waits for 100 MB) and sets its per-piece timeout over the deadline, which cut a handler
    /// slower than lws's timeout off (found by reviews, 2026-12-07). Runs before the loop waits
    /// again, after lws has returned from the read.
    func restoreHandlerDeadlineAfterThisRead(_ session: HTTPSession) {
        let id = session.id
        loop.post { [self] in
            guard let session = inFlight[id], session.state == .dispatched else { return }
            lws_set_timeout(session.wsi, PENDING_TIMEOUT_USER_OK, Self.handlerDeadlineSeconds)
        }
    }

    /// Runs the responder in a task; the response comes back through the loop's inbox.
    private func dispatch(_ session: HTTPSession) {
        session.state = .dispatched
        // Stop reading while the responder runs: buffered pipelined bytes would otherwise make lws
        // repeat BODY_COMPLETION on every service pass (a busy loop). Reading resumes in
        // `HTTPSession.respond`, because a flow-controlled h1 wsi gets no HTTP_WRITEABLE either
        // (rops_handle_POLLIN_h1 returns early).
        session.pauseReading()
        // lws's own request timeout (`timeout_secs`) would cut off a slow handler after 10 s;
        // allow a generous bound instead, so a hung handler still cannot hold a socket forever.
        lws_set_timeout(session.wsi, PENDING_TIMEOUT_USER_OK, Self.handlerDeadlineSeconds)
        let request = session.request
        let id = session.id
        let box = session.responseBox
        let responder = self.responder
        let deliver: @Sendable (HTTPResponse) -> Void = { [self] response in
            box.fulfil(response)
            loop.post { [self] in responseArrived(for: id) }
        }
        let executor = responder.executor(for: request)
        responder.start(request, alone: isAlone(id)) { immediately in
            var rest: (@Sendable () async -> HTTPResponse)?
            if immediately {
                // Without a task when the responder can answer here (an order write on the idle
                // SQLite writer: `APIResponder.respondNow`), or its task goes on from where it left.
                switch responder.respondNow(to: request) {
                case .answered(let response)?:
                    deliver(response)
                    return
                case .later(let remaining)?: rest = remaining
                case nil: break
                }
            }
            let operation: @Sendable () async -> Void = { [rest] in
                if let rest { deliver(await rest()) } else { deliver(await responder.respond(to: request)) }
            }
            // At once: the task's code up to its first suspension runs here, without a job through
            // its executor's queue and a switch into it (measured: docs/BENCHMARKS.md, 2026-12-06).
            if immediately, #available(macOS 26, iOS 26, *) {
                Task.immediate(executorPreference: executor, operation: operation)
            } else {
                Task(executorPreference: executor, operation: operation)
            }
        }
        if box.isFilled { session.answeredInline = true }
    }

    /// Inline answers a loop pass may hold before later requests of the pass go to their executor.
    static let inlineAnswersPerPass = 2

    /// Whether the request just dispatched (`id`) may have its responder run it on this thread
    /// (`HTTPResponder.start`'s `alone`): no other request is running — every other dispatched one
    /// has its answer already (answered inline in this loop pass, or by its task elsewhere; it only
    /// waits for a drain) — and fewer than `inlineAnswersPerPass` were answered inline in this
    /// pass. A request still receiving its body, or whose answer is being written, does not count.
    ///
    /// Measured (`paced 1000`, two wrk threads on fixed schedules): counting every request in hand
    /// sent about half the writes to the writer thread, each one read in the same loop pass as the
    /// other thread's, which had already committed here. The cap keeps a larger burst (many
    /// connections readable at once) from committing one by one here while no socket is served:
    /// past it, writes go to the writer thread and share one commit. Service thread; looks only at
    /// the requests whose answer is not known to be in (`DispatchedRequests.waiting`).
    private func isAlone(_ id: UInt64) -> Bool {
        guard dispatched.answeredInline < Self.inlineAnswersPerPass else { return false }
        return dispatched.waiting.allSatisfy { $0.key == id || $0.value.isFilled }
    }

    /// Service thread: hands the response to its session, if the connection is still there;
    /// while posted work runs, with that work's frames: after them, or before a large fan-out's
    /// (`woken`).
    private func responseArrived(for id: UInt64) {
        if isDeferringWrites {
            deferredAnswers.append(id)
            return
        }
        answer(id)
    }

    /// The answers noted while posted work ran, in the order they came.
    func answerDeferred() {
        guard !deferredAnswers.isEmpty else { return }
        swap(&deferredAnswers, &answering)
        defer { answering.removeAll(keepingCapacity: true) }
        for id in answering { answer(id) }
    }

    private func answer(_ id: UInt64) {
        guard let session = inFlight[id], session.state == .dispatched, let response = session.responseBox.take()
        else { return }
        if !isShuttingDown, session.answerNow(response) {
            // lws ends a kept-alive transaction by asking for `POLLOUT` (`LRS_DEFERRING_ACTION`) and
            // reads the next request only after the loop has seen it: two `epoll_ctl`s and a loop
            // pass per answer. The answer just went into the kernel whole, so the socket was
            // writable; saying so at once lets lws take that step in this pass, through its own
            // libev callback (which also starts its idle pass for pipelined bytes it holds).
            // Measured: -4.8 µs per write at 1 000 writes/s (docs/BENCHMARKS.md, 2026-12-06 20:12).
            if session.keptAlive, lws_partial_buffered(session.wsi) == 0 {
                loop.reportWritable(lws_get_socket_fd(session.wsi))
            }
            sessionFinished(session)
            return
        }
        session.respond(response, close: isShuttingDown)
    }

    /// Called by sessions when their transaction is over.
    func sessionFinished(_ session: HTTPSession) {
        writeStatistics.httpResponses += 1
        writeStatistics.httpWrites += session.writes
        if session.wroteOwnHead { writeStatistics.ownHeads += 1 }
        if inFlight[session.id] === session { inFlight[session.id] = nil }
        if session.keptAlive { connectionWentIdle(session.wsi) }
    }

    /// lws 4.1 bug: for a body request parsed from bytes it had buffered (pipelined in the same
    /// packet behind an earlier request), it hands over the start of the request's own head as the
    /// body. Such a body begins with "METHOD /" (or is a prefix of it); no JSON or form body does.
    /// Compared byte by byte, without building "METHOD /" (every request with a body asks).
    static func bodyIsOwnRequestHead(_ request: HTTPRequest) -> Bool {
        let body = request.body
        guard !body.isEmpty else { return false }
        var index = body.startIndex
        // Whether the body goes on with `bytes` (or ends within them: a prefix of the head counts).
        func continues(with bytes: String.UTF8View) -> Bool {
            for byte in bytes {
                guard index < body.endIndex else { return true }
                guard body[index] == byte else { return false }
                index += 1
            }
            return true
        }
        return continues(with: request.method.utf8) && continues(with: " /".utf8)
    }

    /// A header's decimal value (`1*DIGIT`, RFC 9110), with the blanks HTTP allows around a value
    /// (space, tab); nil for anything else, a sign included, past 18 digits, or a value of more
    /// than 30 bytes. Read by byte: a `Character` walk looked up grapheme properties (and
    /// `trimmingCharacters(in:)` bridged to NSString on Linux), at one call per request.
    ///
    /// Why 30 bytes: lws reads Content-Length itself into a 32-byte buffer and takes a longer
    /// value for no length at all, so it would frame no body (or a 100 MB one) while this side
    /// waited for the body it read; the connection then hung until lws's timeout, unanswered.
    static func integer(_ text: String) -> Int? {
        guard text.utf8.count <= 30 else { return nil }
        var value = 0, digits = 0, trailing = false
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"):
                if digits > 0 { trailing = true }
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard !trailing, digits < 18 else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
            default:
                return nil
            }
        }
        return digits > 0 ? value : nil
    }

    /// How long a responder may take before the connection is dropped.
    static let handlerDeadline: Duration = .seconds(300)
    /// `handlerDeadline` as lws takes it, worked out once: every request sets it, and the
    /// `Duration` division and rounding cost about 1 µs each time (a profile at 1 000 writes/s).
    static let handlerDeadlineSeconds = Int32(clamping: wholeSeconds(handlerDeadline))

    static func tooLarge(_ limit: Int) -> HTTPResponse {
        .jsonError(status: 413, code: "payload_too_large", message: "The body is larger than \(limit) bytes.")
    }
}

extension ServerCore {
    /// The answer to a `CONNECT`, which lws has already made a raw socket: a 405 in the SPEC's error
    /// shape, written at once (a short write to a fresh socket), before the caller closes.
    func refuseRawConnection(_ wsi: OpaquePointer) {
        ownAnswerObserver?(405)  // one of the network layer's own answers (`answerItself`)
        let answer = Self.connectRefusal
        let pre = FrameStorage.headroom
        var buffer = [UInt8](repeating: 0, count: pre + answer.count)
        buffer.replaceSubrange(pre..., with: answer)
        buffer.withUnsafeMutableBufferPointer { b in
            _ = lws_write(wsi, b.baseAddress! + pre, answer.count, LWS_WRITE_HTTP)  // = LWS_WRITE_RAW (a macro Swift cannot see)
        }
    }

    private static let connectRefusal: [UInt8] = {
        let body = #"{"error":"method_not_allowed","message":"CONNECT is not supported here."}"#
        return Array(
            ("HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
                + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body).utf8)
    }()
}
