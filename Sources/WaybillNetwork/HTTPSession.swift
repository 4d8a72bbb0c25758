import CWebSockets

/// One HTTP request/response transaction on one connection; lives in that wsi's session slot.
///
/// lws re-zeroes the slot at every keep-alive transaction, so there is one `HTTPSession` per
/// request, created in `LWS_CALLBACK_HTTP` and released in `HTTP_DROP_PROTOCOL`/`CLOSED_HTTP`.
/// Service thread only.
final class HTTPSession {
    enum State {
        /// Waiting for `HTTP_BODY` pieces (Content-Length or chunked).
        case readingBody
        /// The responder is running in a task.
        case dispatched
        /// A response is set and being written.
        case responding
        case finished
    }

    /// Never reused; responses find their session by it (wsis are reused at once).
    let id: UInt64
    let wsi: OpaquePointer
    var request: HTTPRequest
    var state = State.readingBody {
        didSet {
            guard oldValue != state else { return }
            if state == .dispatched { dispatched.waiting[id] = responseBox }
            if oldValue == .dispatched { leftDispatched() }
        }
    }
    /// Its task ran to its answer inside `HTTPResponder.start` (an order write run inline): the
    /// answer waits only for this loop pass's drain (`DispatchedRequests.answeredInline`).
    var answeredInline = false {
        didSet {
            guard oldValue != answeredInline, state == .dispatched else { return }
            dispatched.answeredInline += answeredInline ? 1 : -1
            dispatched.waiting[id] = answeredInline ? nil : responseBox
        }
    }
    /// Content-Length framing: bytes still expected (nil for chunked).
    var chunked: ChunkedBodyDecoder?
    /// The largest body this request may have (`HTTPResponder.bodyLimit`, at most `maxBodyBytes`).
    var bodyLimit = Int.max
    /// Close the connection after this response (chunked or no-length bodies, 413, shutdown).
    var closeAfterResponse = false
    /// The request said HTTP/1.1 (as lws reads it: `LwsRequestReader.isHTTP11`), so an answer's
    /// status line starts "HTTP/1.1" (`writeHeaders`' own head).
    var isHTTP11 = false
    /// When the request's head was in (`HTTPServerConfiguration.bodyDeadline` counts from it).
    let startedAt = ContinuousClock.now

    private(set) var response: HTTPResponse?
    private var isReadingPaused = false
    /// Where the responder's task leaves the response.
    let responseBox = ResponseBox()
    private var headersSent = false
    private var bodyOffset = 0
    /// `lws_write` calls for this response (`WriteStatistics.httpWrites`).
    private(set) var writes = 0
    /// This response's head was written by `writeOKHead` (`WriteStatistics.ownHeads`).
    private(set) var wroteOwnHead = false
    /// The answer ended the transaction and the connection stays open for the next request
    /// (`ServerCore.connectionWentIdle`): lws has set its keep-alive timer, or holds the answer's
    /// tail and ends the transaction itself once that is sent.
    private(set) var keptAlive = false
    private let counter: LiveObjectCounter
    private let dispatched: DispatchedRequests
    private let scratch: WriteScratch

    /// Largest body piece per write: lws sends about `pt_serv_buf_size` at once and copies the rest.
    static let writeChunk = 16 << 10
    /// Bodies up to this size leave in the same write as the head (`writeHeaders(_:body:)`).
    static let singleWriteLimit = 12 << 10
    /// Bodies up to this size are written by `answerNow` in one `lws_write`, lws keeping what the
    /// kernel does not take yet (every answer Waybill makes is far smaller; larger ones go in
    /// `writeChunk` pieces from `HTTP_WRITEABLE`, so lws never holds a copy of a huge body).
    static let immediateWriteLimit = 1 << 20

    init(
        id: UInt64, wsi: OpaquePointer, request: HTTPRequest, counter: LiveObjectCounter,
        dispatched: DispatchedRequests, scratch: WriteScratch
    ) {
        self.id = id
        self.wsi = wsi
        self.request = request
        self.counter = counter
        self.dispatched = dispatched
        self.scratch = scratch
        counter.increment()
    }

    deinit {
        counter.decrement()
        if state == .dispatched { leftDispatched() }  // the connection went away meanwhile
    }

    private func leftDispatched() {
        if answeredInline { dispatched.answeredInline -= 1 } else { dispatched.waiting[id] = nil }
    }

    /// Sets the response and asks lws for `HTTP_WRITEABLE`. A second response is ignored.
    func respond(_ response: HTTPResponse, close: Bool = false) {
        guard state != .responding && state != .finished else { return }
        self.response = Self.sendable(response)
        if close { closeAfterResponse = true }
        if isReadingPaused {
            isReadingPaused = false
            lws_rx_flow_control(wsi, 1)
        }
        state = .responding
        lws_callback_on_writable(wsi)
    }

    /// Writes a response at once, outside any callback, while reading is still paused, then ends
    /// the transaction and reads again. Returns `false` (nothing done) when the response must take
    /// the `respond` path: a body over `immediateWriteLimit`, a close after it, or output lws
    /// still holds.
    ///
    /// Why: `respond` turns reading back on and waits for `HTTP_WRITEABLE`; a client that
    /// half-closed after its request (`shutdown(SHUT_WR)`, `nc -N`) then has its end of stream read
    /// first, and lws closes the connection with the response unsent. Written here, the response is
    /// in the kernel, or held by lws, before lws reads anything more: what lws holds it sends
    /// before it ends the transaction, and before it closes on that end of stream (lws 4.1's
    /// `LRS_FLUSHING_BEFORE_CLOSE`, up to 5 s).
    func answerNow(_ response: HTTPResponse) -> Bool {
        let response = Self.sendable(response)
        guard state == .dispatched, isReadingPaused, !closeAfterResponse, lws_partial_buffered(wsi) == 0,
            response.body.count <= Self.immediateWriteLimit
        else { return false }
        self.response = response
        state = .responding
        headersSent = true
        guard writeHeaders(response, body: hasBody(response) ? response.body : nil) else {
            // Nothing could be written: let lws close it at its next pass.
            state = .finished
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            return true
        }
        bodyOffset = response.body.count
        state = .finished
        isReadingPaused = false
        lws_rx_flow_control(wsi, 1)
        if lws_http_transaction_completed(wsi) != 0 {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        } else {
            keptAlive = true
        }
        return true
    }

    /// Sends the interim `100 Continue` a client asked for with `Expect: 100-continue`.
    func writeContinue() {
        let line = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
        let pre = FrameStorage.headroom
        var buffer = [UInt8](repeating: 0, count: pre) + line
        _ = buffer.withUnsafeMutableBufferPointer { b in
            lws_write(wsi, b.baseAddress! + pre, line.count, LWS_WRITE_HTTP_HEADERS)
        }
    }

    /// Stops lws reading this connection until `respond` (see `ServerCore.dispatch`).
    func pauseReading() {
        isReadingPaused = true
        lws_rx_flow_control(wsi, 0)
    }

    /// Writes the next piece in `HTTP_WRITEABLE`: headers first, then body chunks, then ends the
    /// transaction. Returns the callback's result (-1 closes the connection).
    func writeNext() -> Int32 {
        guard state == .responding, let response else { return 0 }
        if !headersSent {
            headersSent = true
            if hasBody(response) && response.body.count <= Self.singleWriteLimit {
                guard writeHeaders(response, body: response.body) else { return -1 }
                bodyOffset = response.body.count
                return finish()
            }
            guard writeHeaders(response) else { return -1 }
            if hasBody(response) {
                lws_callback_on_writable(wsi)  // the body goes in a later, separate write
                return 0
            }
            return finish()
        }
        let count = response.body.count
        let n = min(Self.writeChunk, count - bodyOffset)
        let isLast = bodyOffset + n == count
        guard write(response.body, from: bodyOffset, count: n, isLast: isLast) else { return -1 }
        bodyOffset += n
        if !isLast {
            lws_callback_on_writable(wsi)
            return 0
        }
        return finish()
    }

    /// Writes whatever is left of the response at once (headers, then the rest of the body in one
    /// write that lws buffers if needed) and ends the transaction. For `ServerCore.httpBodyCompleted`.
    func writeAllNow() -> Int32 {
        guard state == .responding, let response else { return -1 }
        if !headersSent {
            headersSent = true
            guard writeHeaders(response) else { return -1 }
        }
        if hasBody(response) && bodyOffset < response.body.count {
            let n = response.body.count - bodyOffset
            guard write(response.body, from: bodyOffset, count: n, isLast: true) else { return -1 }
            bodyOffset += n
        }
        return finish()
    }

    private func write(_ body: [UInt8], from offset: Int, count n: Int, isLast: Bool) -> Bool {
        writes += 1
        let pre = FrameStorage.headroom
        var buffer = [UInt8](repeating: 0, count: pre + n)
        buffer.withUnsafeMutableBufferPointer { b in
            body.withUnsafeBufferPointer { body in
                (b.baseAddress! + pre).update(from: body.baseAddress! + offset, count: n)
            }
        }
        let written = buffer.withUnsafeMutableBufferPointer { b in
            lws_write(wsi, b.baseAddress! + pre, n, isLast ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP)
        }
        return written >= 0
    }

    private func hasBody(_ response: HTTPResponse) -> Bool {
        !response.body.isEmpty && !Self.forbidsBody(response.status) && request.method != "HEAD"
    }

    /// The status as sent: one outside 200…599 is a bug of whoever made the response (or a stored
    /// answer a damaged row gave back for an `Idempotency-Key`), and goes out as 500. `UInt32(_:)`
    /// of a negative or huge one trapped on the service thread and took every socket of the node
    /// down with it (found by a review, 2026-12-05).
    /// (A 1xx is never a final answer.)
    static func wireStatus(_ status: Int) -> Int { (200...599).contains(status) ? status : 500 }

    /// `response` with its status as sent, so the body rules (`forbidsBody`) follow what goes out:
    /// a stored 1xx sent as 500 without a body or a length left a keep-alive client waiting.
    static func sendable(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.status = wireStatus(response.status)
        return response
    }

    /// 1xx, 204 and 304 responses never carry a body (RFC 9110).
    static func forbidsBody(_ status: Int) -> Bool { status == 204 || status == 304 || (100..<200).contains(status) }

    private func finish() -> Int32 {
        state = .finished
        if closeAfterResponse { return -1 }
        guard lws_http_transaction_completed(wsi) == 0 else { return -1 }
        keptAlive = true
        return 0
    }

    /// Status line and headers in one write; with `body`, the body too, in the same write.
    ///
    /// Why one write for small bodies: lws's documented way sends the body from a second
    /// `HTTP_WRITEABLE`, which costs every answer another loop round (`epoll_ctl`, `epoll_wait`), a
    /// second `send` and a second TCP segment. Over HTTP/1.1 the bytes are the same either way. The
    /// length then goes in as a plain header, so lws does not count the body against it (it would
    /// refuse the body written as part of the head); lws needs that count only for `LWS_WRITE_HTTP`
    /// writes, which this path makes none of. HTTP/2 is not served (no TLS), so its framing rules
    /// do not apply.
    private func writeHeaders(_ response: HTTPResponse, body: [UInt8]? = nil) -> Bool {
        writes += 1
        // Written here from the response itself, never from the application's headers.
        func isSkipped(_ name: String) -> Bool {
            name == "content-length" || name == "connection" || name == "transfer-encoding"
        }
        let headSize = 512 + response.headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        let pre = FrameStorage.headroom
        return scratch.withBytes(pre + headSize + (body?.count ?? 0)) { base -> Bool in
            let start = base + pre
            let end = start + headSize
            if let body, isHTTP11, Self.wireStatus(response.status) == 200 {
                wroteOwnHead = true
                let count = Self.writeOKHead(response, body: body, closing: closeAfterResponse, at: start, isSkipped: isSkipped)
                return lws_write(wsi, start, count, LWS_WRITE_HTTP_HEADERS) == count
            }
            var p: UnsafeMutablePointer<UInt8>? = start
            if lws_add_http_header_status(wsi, UInt32(Self.wireStatus(response.status)), &p, end) != 0 { return false }
            if body != nil {
                let length = Array(String(response.body.count).utf8)
                let added = length.withUnsafeBufferPointer { v in
                    lws_add_http_header_by_token(
                        wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, v.baseAddress, Int32(v.count), &p, end)
                }
                if added != 0 { return false }
            } else if !Self.forbidsBody(response.status),
                lws_add_http_header_content_length(wsi, lws_filepos_t(response.body.count), &p, end) != 0
            {
                return false
            }
            if closeAfterResponse, lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, "close", 5, &p, end) != 0 {
                return false
            }
            for (name, value) in response.headers.fields where !isSkipped(name) {
                // lws wants the name with its colon, NUL-terminated; the value by length. Both are
                // passed without a copy into an array (every answer carries four or five headers).
                var value = value
                let ok = LwsHeaderName.withColon(name) { key, keyLength in
                    key.withMemoryRebound(to: UInt8.self, capacity: Int(keyLength) + 1) { n in
                        value.withUTF8 { v in
                            lws_add_http_header_by_name(wsi, n, v.baseAddress ?? n, Int32(v.count), &p, end) == 0
                        }
                    }
                }
                if !ok { return false }
            }
            guard let body else { return lws_finalize_write_http_header(wsi, start, &p, end) == 0 }
            guard lws_finalize_http_header(wsi, &p, end) == 0, var tail = p else { return false }
            body.withUnsafeBufferPointer { bytes in
                tail.update(from: bytes.baseAddress!, count: bytes.count)
                tail += bytes.count
            }
            let count = start.distance(to: tail)
            return lws_write(wsi, start, count, LWS_WRITE_HTTP_HEADERS) == count
        }
    }

    /// A 200 answer to an HTTP/1.1 request with its body, byte for byte as the lws calls above
    /// write it (`lws_add_http_header_status`: "HTTP/1.1 200 OK"; `…_by_token`: "content-length: ";
    /// `…_by_name`: the name, a space, the value, CRLF; `lws_finalize_http_header`: CRLF), but
    /// without them: lws formats the status line with `snprintf` and each header is a call and a
    /// look-up of its name. Every order write's answer, and most reads', take this path. Returns
    /// the bytes written from `start`; the room is the caller's (`headSize` counts each field's
    /// name, value and 4 bytes, plus 512).
    static func writeOKHead(
        _ response: HTTPResponse, body: [UInt8], closing: Bool, at start: UnsafeMutablePointer<UInt8>,
        isSkipped: (String) -> Bool
    ) -> Int {
        var p = start
        func put(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
            p.update(from: base, count: bytes.count)
            p += bytes.count
        }
        func put(_ text: StaticString) { put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)) }
        func put(_ text: String) {
            var text = text
            text.withUTF8 { put($0) }
        }
        put("HTTP/1.1 200 OK\r\ncontent-length: ")
        // The length's digits, without a String: at most 20.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { room in
            var n = body.count, i = room.count
            repeat {
                i -= 1
                room[i] = UInt8(ascii: "0") + UInt8(n % 10)
                n /= 10
            } while n > 0
            put(UnsafeBufferPointer(rebasing: room[i...]))
        }
        put("\r\n")
        if closing { put("connection: close\r\n") }
        for (name, value) in response.headers.fields where !isSkipped(name) {
            put(name)
            put(": ")
            put(value)
            put("\r\n")
        }
        put("\r\n")
        body.withUnsafeBufferPointer { put($0) }
        return start.distance(to: p)
    }
}

/// The bytes every answer's head (and small body) is put together in before its `lws_write`, kept
/// from one answer to the next. Service thread only (each server has its own).
///
/// Why: a new zeroed array per answer was a `malloc` of over 1 KiB, which makes glibc merge its
/// freed small chunks first (`malloc_consolidate`, 0.6 % of a write's samples with the `memset`,
/// docs/BENCHMARKS.md, 2026-12-06 10:21–). `lws_write` keeps no pointer into what it is given: it
/// sends what it sends and copies any rest into a buffer of its own (`lws_issue_raw`), so these
/// bytes are free again as soon as it returns.
final class WriteScratch {
    /// The most the kept buffer grows to. Larger requests (an answer with a body of up to
    /// `HTTPSession.immediateWriteLimit`) get a buffer of their own, so one large answer does not
    /// keep a megabyte for the server's life.
    static let keptLimit = 64 << 10
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int

    init(capacity: Int = 4 << 10) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// Bytes kept now (tests).
    var keptBytes: Int { capacity }

    /// Runs `body` with `count` writable bytes (not zeroed), valid only during the call.
    func withBytes<R>(_ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> R) -> R {
        guard count <= Self.keptLimit else {
            let own = UnsafeMutablePointer<UInt8>.allocate(capacity: count)
            defer { own.deallocate() }
            return body(Self.marked(own, count))
        }
        if count > capacity {
            base.deallocate()
            capacity = min(max(count, capacity * 2), Self.keptLimit)
            base = .allocate(capacity: capacity)
        }
        return body(Self.marked(base, count))
    }

    /// In debug builds (the tests) the bytes are filled with 0xAA first, so an answer that sent a
    /// byte it never wrote shows it.
    private static func marked(_ bytes: UnsafeMutablePointer<UInt8>, _ count: Int) -> UnsafeMutablePointer<UInt8> {
        #if DEBUG
        bytes.update(repeating: 0xAA, count: count)
        #endif
        return bytes
    }
}

/// The sessions whose responder has started and whose answer has not been handed to their
/// connection yet (`HTTPSession.State.dispatched`), for `ServerCore.dispatch`'s `alone`.
/// Sessions keep these up to date as their state changes. Service thread only.
final class DispatchedRequests {
    /// Sessions answered inside `HTTPResponder.start`, waiting for this pass's drain.
    var answeredInline = 0
    /// The other dispatched sessions' answer boxes, by session id: filled once their task answered.
    var waiting: [UInt64: ResponseBox] = [:]
}

