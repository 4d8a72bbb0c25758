import Testing

@testable import WaybillNetwork

/// Header names are stored lower-cased (`HTTPHeaders.lowercased`: by byte for ASCII, by
/// `lowercased()` otherwise) and passed to lws as `name:` C strings (`LwsHeaderName`).
struct HeaderNameTests {
    @Test func namesAreLowerCasedLikeLowercasedInEveryShape() {
        for name in ["etag", "ETag", "X-Content-Type-Options", "x-content-type-options", "", "A", "Ünïcode-Ä", "X-ÄB"] {
            #expect(HTTPHeaders.lowercased(name) == name.lowercased(), "\(name)")
        }
        var headers = HTTPHeaders()
        headers.set("Cache-Control", "no-cache")
        headers.add("X-Request-ID", "r1")
        #expect(headers.fields.map(\.name) == ["cache-control", "x-request-id"])
        #expect(headers["CACHE-CONTROL"] == "no-cache" && headers["x-request-id"] == "r1")
    }

    @Test func namesReachLwsWithTheirColonAndNoNUL() {
        for name in ["idempotency-key", "etag", "x-not-made-in-advance"] {
            let (text, length) = LwsHeaderName.withColon(name) { key, length in (String(cString: key), length) }
            #expect(text == name + ":")
            #expect(Int(length) == name.utf8.count + 1)
        }
    }
}
