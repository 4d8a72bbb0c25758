import Foundation
import Testing

@testable import WaybillAPI
@testable import WaybillObservability

/// The per-request helpers rewritten for speed (docs/BENCHMARKS.md, 2026-12-02) give what the
/// library calls they replaced gave.
struct HotPathFormattingTests {
    @Test func logTimestampsAreISO8601WithMillisecondsLikeFoundations() {
        let reference = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var millis: [Int64] = [
            0, 1, 999, 59_999, 86_399_999, 86_400_000, -1, -1_000, -86_400_000, -86_400_500,
            951_782_400_000,  // 2000-02-29
            951_868_800_000,  // 2000-03-01
            4_107_542_400_000,  // 2100-03-01 (2100 is no leap year)
            253_402_300_799_999,  // 9999-12-31T23:59:59.999
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 { millis.append(Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &generator)) }
        for ms in millis {
            // Half a millisecond in: both truncate to `ms`, whichever way the binary value falls.
            let date = Date(timeIntervalSince1970: (Double(ms) + 0.5) / 1000)
            #expect(Logger.timestamp(date) == date.formatted(reference), "\(ms)")
            // On the millisecond itself: that millisecond, never the one before.
            let exact = Date(timeIntervalSince1970: Double(ms) / 1000)
            #expect(Logger.timestamp(exact) == Logger.timestamp(date), "\(ms)")
        }
        #expect(Logger.timestamp(Date(timeIntervalSince1970: 1_764_648_306.789)) == "2025-12-02T04:05:06.789Z")
        // A clock set past the four-digit years prints their nearest end, never a fifth digit or a crash.
        #expect(Logger.timestamp(Date(timeIntervalSince1970: 253_402_300_800 + 86_400)) == "9999-12-31T23:59:59.999Z")
        #expect(Logger.timestamp(Date(timeIntervalSince1970: -62_167_219_200 - 86_400)) == "0000-01-01T00:00:00.000Z")
    }

    @Test func logfmtQuotingOnTheByteFastPathAndOffIt() {
        let cases: [(String, String)] = [
            ("/api/orders/42/", "/api/orders/42/"), ("a\\b", "a\\b"), ("", "\"\""), ("a b", "\"a b\""),
            ("a=b", "\"a=b\""), ("say \"hi\"", "\"say \\\"hi\\\"\""), ("tab\t", "\"tab\\t\""),
            ("del\u{7f}", "\"del\\u{7f}\""), ("nel\u{85}", "\"nel\\u{85}\""), ("ls\u{2028}", "\"ls\\u{2028}\""),
            ("é🚚", "é🚚"), ("é 🚚", "\"é 🚚\""),
        ]
        for (value, expected) in cases { #expect(Logger.quote(value) == expected, "\(value)") }
        let capture = LogCapture()
        Logger(sink: capture.sink).adding(["node": "n 1"]).info("request", ["path": "/x", "user_id": ""])
        let line = capture.all.first ?? ""
        #expect(line.hasPrefix("ts=20"), "\(line)")
        #expect(line.hasSuffix(#" level=info msg=request path=/x user_id="" node="n 1""#), "\(line)")
    }

    /// A line written as bytes into the log writer (`Logger.writeLine`, every access line) is the
    /// line `Logger.line` builds, byte for byte; a line it cannot write (a control character, a
    /// value that is not ASCII, a line past its buffer) is left to `line`, and `log` still writes it.
    @Test func logLinesWrittenAsBytesAreTheLinesBuiltAsStrings() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-log-\(UUID().uuidString)").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        let writer = LogWriter(descriptor: descriptor, coalescing: .milliseconds(1)) { "dropped \($0)" }
        let at = Date(timeIntervalSince1970: 1_796_543_210.987)
        let context = [("node", "n-1")]
        let plain: [KeyValuePairs<String, String>] = [
            ["method": "PATCH", "path": "/api/orders/42/", "status": "200", "duration_ms": "0.21", "user_id": "7"],
            ["ua": "curl 8.0", "query": "a=b", "said": #"say "hi" \ there"#, "empty": "", "slash": #"a\b"#],
        ]
        var expected: [String] = []
        for fields in plain {
            #expect(Logger.writeLine(.info, "request", fields, context: context, at: at, to: writer))
            expected.append(Logger.line(.info, "request", fields, context: context, at: at))
        }
        let others: [KeyValuePairs<String, String>] = [
            ["path": "/a\nb"], ["name": "Jürgen"], ["del": "a\u{7f}"], ["long": String(repeating: "x", count: Logger.writeLineCapacity)],
        ]
        for fields in others {
            #expect(!Logger.writeLine(.warning, "odd request", fields, context: [], at: at, to: writer))
            expected.append(Logger.line(.warning, "odd request", fields, at: at))
            Logger(writer: writer).log(.warning, "odd request", fields, at: at)
        }
        Logger(writer: writer).adding(["node": "n-1"]).log(.info, "request", plain[0], at: at)
        expected.append(Logger.line(.info, "request", plain[0], context: context, at: at))
        #expect(writer.flush(timeout: .seconds(10)))
        _ = writer.stop()
        let written = try String(contentsOfFile: path, encoding: .utf8)
        #expect(written == expected.map { $0 + "\n" }.joined())
    }

    @Test func sha256MatchesTheStandardVectors() {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(Crypto.sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(Crypto.sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let million = [UInt8](repeating: 0x61, count: 1_000_000)
        #expect(hex(Crypto.sha256(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // Each input shape: a String (its UTF-8 in place), an array slice, a collection with no
        // contiguous storage (copied first), and an empty array (no base address).
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(hex(Crypto.sha256(Array("xabcx".utf8)[1...3])) == abc)
        #expect(hex(Crypto.sha256("cba".utf8.reversed())) == abc)
        #expect(hex(Crypto.sha256([UInt8]())) == hex(Crypto.sha256("")))
        let bridged = NSString(string: "abc") as String  // not native UTF-8: withUTF8 makes it so
        #expect(hex(Crypto.sha256(bridged)) == abc)
    }
}

/// `Authenticator.bearerToken`: the byte path for ASCII headers gives what the character path gives.
struct BearerTokenTests {
    @Test func tokensAreTakenFromEveryShapeOfHeader() {
        let cases: [(String?, String?)] = [
            (nil, nil), ("", nil), ("Bearer", nil), ("Bearer ", nil), ("Bearer  ", ""), ("Bearer abc", "abc"),
            ("bearer abc", "abc"), ("BEARER abc", "abc"), ("BeArEr \t abc \r\n", "abc"), ("Bearer\tabc", nil),
            ("Basic abc", nil), ("Bearerabc", nil), ("Bearer a b", "a b"), ("xBearer abc", nil),
            // Not ASCII: the general path (Unicode whitespace trimmed, Unicode letters kept).
            ("Bearer tökén", "tökén"), ("Bearer abc\u{A0}", "abc"), ("\u{A0}Bearer abc", nil),
        ]
        for (header, expected) in cases {
            #expect(Authenticator.bearerToken(header) == expected, "\(String(describing: header))")
        }
    }
}
