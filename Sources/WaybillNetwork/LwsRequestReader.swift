import CWebSockets

/// Copies a request's method, path, query, headers and peer out of lws into an `HTTPRequest`.
///
/// lws keeps headers only until the request is handled (README: lost after `ESTABLISHED` for
/// WebSockets), so everything the application may need is copied at once. Service thread only.
enum LwsRequestReader {
    /// Headers lws parses itself, by token.
    private static let knownHeaders: [(String, lws_token_indexes)] = [
        ("authorization", WSI_TOKEN_HTTP_AUTHORIZATION),
        ("content-type", WSI_TOKEN_HTTP_CONTENT_TYPE),
        ("content-length", WSI_TOKEN_HTTP_CONTENT_LENGTH),
        ("if-none-match", WSI_TOKEN_HTTP_IF_NONE_MATCH),
        ("if-match", WSI_TOKEN_HTTP_IF_MATCH),
        ("transfer-encoding", WSI_TOKEN_HTTP_TRANSFER_ENCODING),
        ("connection", WSI_TOKEN_CONNECTION),
        ("host", WSI_TOKEN_HOST),
        ("origin", WSI_TOKEN_ORIGIN),
        ("user-agent", WSI_TOKEN_HTTP_USER_AGENT),
        ("accept", WSI_TOKEN_HTTP_ACCEPT),
        ("cookie", WSI_TOKEN_HTTP_COOKIE),
        ("sec-websocket-protocol", WSI_TOKEN_PROTOCOL),
        ("expect", WSI_TOKEN_HTTP_EXPECT),
        // A token of lws's own: looked up by name it was never found (lws parses it into the token).
        ("x-forwarded-for", WSI_TOKEN_X_FORWARDED_FOR),
    ]
    /// Headers lws does not know: looked up by name (lower case, with the colon lws expects).
    static let customHeaders = ["idempotency-key", "if-order-created", "x-request-id", "last-event-id"]

    private static let methods = ["GET", "POST", "OPTIONS", "PUT", "PATCH", "DELETE", "CONNECT", "HEAD"]

    /// The whole request line and headers of the request `wsi` is handling (body empty).
    static func request(_ wsi: OpaquePointer, remoteAddress: String, path fallbackPath: String? = nil) -> HTTPRequest {
        var uri: UnsafeMutablePointer<CChar>?
        var uriLength: Int32 = 0
        let index = Int(lws_http_get_uri_and_method(wsi, &uri, &uriLength))
        let method = methods.indices.contains(index) ? methods[index] : "GET"
        var path = fallbackPath ?? "/"
        if let uri, uriLength > 0 {
            path = uri.withMemoryRebound(to: UInt8.self, capacity: Int(uriLength)) {
                String(decoding: UnsafeBufferPointer(start: $0, count: Int(uriLength)), as: UTF8.self)
            }
        }
        return HTTPRequest(
            method: method,
            path: path,
            query: query(wsi),
            headers: headers(wsi),
            body: [],
            remoteAddress: remoteAddress
        )
    }

    /// Whether the request line said HTTP/1.1, as lws decides it (`lws_http_action`: a version of
    /// more than 7 bytes whose 6th and 8th are "1"; anything else is answered as HTTP/1.0).
    static func isHTTP11(_ wsi: OpaquePointer) -> Bool {
        let length = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP))
        guard length > 7, length <= 10 else { return false }  // lws copies it into 11 bytes with the NUL
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 11) { room -> Bool in
            guard lws_hdr_copy(wsi, room.baseAddress!, 11, WSI_TOKEN_HTTP) > 0 else { return false }
            return room[5] == CChar(UInt8(ascii: "1")) && room[7] == CChar(UInt8(ascii: "1"))
        }
    }

    /// The path of an upgrade request (`WSI_TOKEN_GET_URI`), without the query.
    static func getPath(_ wsi: OpaquePointer) -> String? { header(wsi, WSI_TOKEN_GET_URI) }

    /// Query arguments, each already URL-decoded by lws.
    static func query(_ wsi: OpaquePointer) -> [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        let total = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS))
        guard total > 0 else { return result }
        var fragment: Int32 = 0
        while let text = copied(
            capacity: total + 1, { lws_hdr_copy_fragment(wsi, $0, $1, WSI_TOKEN_HTTP_URI_ARGS, fragment) })
        {
            if let eq = text.firstIndex(of: "=") {
                result.append((String(text[..<eq]), String(text[text.index(after: eq)...])))
            } else if !text.isEmpty {
                result.append((text, ""))
            }
            fragment += 1
        }
        return result
    }

    static func headers(_ wsi: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for (name, token) in knownHeaders {
            if let value = header(wsi, token) { headers.add(name, value) }
        }
        for (name, key) in customHeaderKeys {
            if let value = customHeader(wsi, key) { headers.add(name, value) }
        }
        return headers
    }

    /// `customHeaders` with their C keys (`LwsHeaderName`), made once: looked up by name, each key
    /// cost a hash of the name, four per request (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
    private static let customHeaderKeys = customHeaders.map { ($0, LwsHeaderName.key($0)) }

    /// A header lws knows by token, or nil when absent.
    static func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = Int(lws_hdr_total_length(wsi, token))
        guard length > 0 else { return nil }
        return copied(capacity: length + 1) { lws_hdr_copy(wsi, $0, $1, token) }
    }

    /// A header lws does not know, by its key (`LwsHeaderName.key`: the lower-case name and a colon).
    private static func customHeader(_ wsi: OpaquePointer, _ key: [CChar]) -> String? {
        key.withUnsafeBufferPointer { buffer -> String? in
            let key = buffer.baseAddress!, keyLength = Int32(buffer.count - 1)
            let length = Int(lws_hdr_custom_length(wsi, key, keyLength))
            guard length > 0 else { return nil }
            return copied(capacity: length + 1) { lws_hdr_custom_copy(wsi, $0, $1, key, keyLength) }
        }
    }

    /// A string lws writes with `copy(buffer, capacity)` (NUL-terminated; returns its length, or
    /// a negative number on failure), written straight into the string's storage: these copies
    /// run for every header of every request (invalid UTF-8 is repaired, as `String(decoding:)` does).
    private static func copied(
        capacity: Int, _ copy: (UnsafeMutablePointer<CChar>, Int32) -> Int32
    ) -> String? {
        var failed = false
        let text = String(unsafeUninitializedCapacity: capacity) { buffer in
            let n = buffer.withMemoryRebound(to: CChar.self) { copy($0.baseAddress!, Int32(clamping: $0.count)) }
            guard n >= 0 else {
                failed = true
                return 0
            }
            return min(Int(n), buffer.count)
        }
        return failed ? nil : text
    }

    /// The peer's address as lws reads it: a `getpeername` and an `snprintf` each time
    /// (`ServerCore.remoteAddress` keeps it per connection).
    static func remoteAddress(_ wsi: OpaquePointer) -> String {
        let address = copied(capacity: 64) { buffer, capacity in
            guard lws_get_peer_simple(wsi, buffer, Int(capacity)) != nil else { return -1 }
            return Int32(UnsafeBufferPointer(start: buffer, count: Int(capacity)).firstIndex(of: 0) ?? Int(capacity))
        } ?? ""
        // lws listens dual-stack: show IPv4 peers as IPv4.
        return address.hasPrefix("::ffff:") ? String(address.dropFirst(7)) : address
    }
}
