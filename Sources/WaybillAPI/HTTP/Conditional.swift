import WaybillDomain
import WaybillNetwork
import WaybillText

/// `ETag` / `If-None-Match`: an unchanged list or order costs a 304 with no body.
enum Conditional {
    /// An order's tag: `"o42-v7-h0b7e55d1"`, the order's version (SPEC §2), which every write bumps,
    /// and its check in this history (`Order.versionCheck`); with `-s<version>` added while the
    /// assigned driver's receipt counts (`"o42-v7-h0b7e55d1-s7"`).
    ///
    /// The check: after a restore or a failover that lost commits, version 7 can come back with
    /// other content, and a client's `If-Match` for the version it saw must not match it (a driver's
    /// queued action, a dispatcher's open edit form). A tag without a check (`"o42-v7"`, which
    /// clients build from a version alone) still matches by version.
    ///
    /// A receipt is not a write (the version stays), yet it changes the detail's body: with the
    /// version alone, `If-None-Match` would answer 304 and a panel would keep showing "not seen"
    /// after `order_seen`. The receipt's version is enough: for one order version and driver a
    /// receipt is recorded once (it only moves forward), so it names the whole `seen` object.
    /// `If-Match` compares the version part only (`versionPart`): a receipt never makes a
    /// dispatcher's write fail.
    static func etag(_ order: Order) -> String {
        guard let seen = order.seen else { return versionTag(order) }
        return "\"" + versionName(order) + "-h" + order.versionCheck + "-s\(seen.version)\""
    }

    /// The version part of an order's tag, `"o42-v7-h0b7e55d1"`, whatever receipt it carried: what
    /// `If-Match` compares.
    static func versionTag(_ order: Order) -> String {
        // Written byte by byte into one string of the right size: every answer with an order
        // carries this tag, and appending its parts (with the numbers interpolated into strings of
        // their own) cost about 1 µs per write (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
        var check = order.versionCheck
        return String(unsafeUninitializedCapacity: 8 + 2 * ASCIIText.longestDecimal + check.utf8.count) { out in
            var count = 0
            func put(_ byte: UInt8) {
                out[count] = byte
                count += 1
            }
            put(UInt8(ascii: "\"")); put(UInt8(ascii: "o"))
            count = ASCIIText.writeDecimal((order.id ?? OrderID(0)).rawValue, into: out, at: count)
            put(UInt8(ascii: "-")); put(UInt8(ascii: "v"))
            count = ASCIIText.writeDecimal(Int64(order.version), into: out, at: count)
            put(UInt8(ascii: "-")); put(UInt8(ascii: "h"))
            check.withUTF8 { bytes in for byte in bytes { put(byte) } }
            put(UInt8(ascii: "\""))
            return count
        }
    }

    /// The tag a client builds from the version alone, `"o42-v7"`: it matches by version.
    static func bareVersionTag(_ order: Order) -> String { "\"" + versionName(order) + "\"" }

    /// `o42-v7`: the order and its version number, what every tag of it starts with.
    private static func versionName(_ order: Order) -> String { "o\(order.id ?? OrderID(0))-v\(order.version)" }

    /// `"o42-v7-s5"` → `"o42-v7"`; any other tag unchanged.
    static func versionPart(of tag: String) -> String {
        guard tag.hasPrefix("\"o"), tag.hasSuffix("\""), let dash = tag.range(of: "-s", options: .backwards),
            tag[dash.upperBound..<tag.index(before: tag.endIndex)].allSatisfy(\.isASCII),
            tag[dash.upperBound..<tag.index(before: tag.endIndex)].allSatisfy(\.isNumber),
            dash.upperBound < tag.index(before: tag.endIndex)
        else { return tag }
        return tag[..<dash.lowerBound] + "\""
    }

    /// A tag over the exact response bytes (FNV-1a 64): lists have no single version.
    static func etag(bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return "\"l" + String(hash, radix: 16) + "\""
    }

    /// The JSON response, or 304 when the request's `If-None-Match` already names its tag.
    ///
    /// `extra` headers (a list page's `Link`) go on both answers and into a computed tag, so a
    /// cached page is only reused while its next-page link is the same too.
    static func response<T: Encodable>(
        _ value: T, for request: HTTPRequest, etag: String? = nil, extra: [(String, String)] = []
    ) throws -> HTTPResponse {
        var response = try JSONCoding.response(value)
        let tag = etag ?? Self.etag(bytes: response.body + extra.flatMap { Array("\n\($0.0): \($0.1)".utf8) })
        response.headers.set("ETag", tag)
        for (name, value) in extra { response.headers.set(name, value) }
        if let wanted = request.headers["if-none-match"], matches(wanted, tag) {
            var headers = HTTPHeaders()
            headers.set("ETag", tag)
            for (name, value) in extra { headers.set(name, value) }
            return HTTPResponse(status: 304, headers: headers)
        }
        return response
    }

    private static func matches(_ header: String, _ tag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let trimmed = candidate.trimmingCharacters(in: .whitespaces)
            return trimmed == "*" || trimmed == tag || trimmed == "W/" + tag
        }
    }
}

import Foundation
