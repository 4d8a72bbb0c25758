import Foundation
import Testing
import WaybillBroker
import WaybillDomain
import WaybillTesting

struct BrokerWireFormatTests {
    @Test func roundTripKeepsEveryField() throws {
        let batch = sampleEvents(1...60)
        let decoded = try BrokerWireFormat.decode(BrokerWireFormat.encode(batch))
        #expect(decoded == batch)
        #expect(decoded.map(\.cursor) == batch.map(\.cursor))
    }

    /// An `order_seen` event keeps the version seen across the broker (the frame is rebuilt from it).
    @Test func seenVersionSurvives() throws {
        var stored = sampleEvents(1...1)[0]
        stored.event.type = .seen
        stored.event.seenVersion = 5
        let decoded = try BrokerWireFormat.decode(BrokerWireFormat.encode([stored]))
        #expect(decoded == [stored])
        #expect(decoded.first?.event.seenVersion == 5)
    }

    @Test func awkwardOrderNumbersSurvive() throws {
        let numbers = ["\"", "\\", "\n\r\t", "\u{0}", "\u{1}\u{1f}\u{7f}", "日本語", "👩‍👩‍👧", "</script>", "{\"v\":2}"]
        for number in numbers {
            var stored = sampleEvents(1...1)[0]
            stored.event.number = number
            let decoded = try BrokerWireFormat.decode(BrokerWireFormat.encode([stored]))
            #expect(decoded == [stored], "number \(number.debugDescription)")
        }
    }

    /// Dates that are not on a millisecond, or built as `Double(ms) / 1000` (4 % of which round down
    /// to ms - 1), keep their cursor and their milliseconds.
    @Test func cursorSurvivesAnyDate() throws {
        var random = SystemRandomNumberGenerator()
        var batch: [StoredEvent] = []
        for id in 1...2000 {
            var stored = sampleEvents(Int64(id)...Int64(id))[0]
            let ms = Int64.random(in: 0...4_102_444_800_000, using: &random)
            stored.committedAt = id % 2 == 0 ? Date(timeIntervalSince1970: Double(ms) / 1000) : Date()
            stored.event.changedAt = Date(timeIntervalSince1970: Double(ms) / 1000 + 0.0004)
            batch.append(stored)
        }
        let decoded = try BrokerWireFormat.decode(BrokerWireFormat.encode(batch))
        #expect(decoded.map(\.cursor) == batch.map(\.cursor))
        #expect(
            decoded.map { BrokerWireFormat.milliseconds(of: $0.committedAt) }
                == batch.map { BrokerWireFormat.milliseconds(of: $0.committedAt) })
        #expect(
            decoded.map { BrokerWireFormat.milliseconds(of: $0.event.changedAt) }
                == batch.map { BrokerWireFormat.milliseconds(of: $0.event.changedAt) })
    }

    @Test func encodingIsVersionedCompactJSON() throws {
        let text = String(decoding: BrokerWireFormat.encode(sampleEvents(2...2)), as: UTF8.self)
        #expect(text.hasPrefix("{\"v\":1,\"events\":[{\"id\":2,"))
        #expect(!text.contains(" \""))
        #expect(text.contains("\"committed_at\":1764547200079"))
        #expect(text.contains("\"groups\":[\"company_3\",\"fleet_3\",\"driver_102\"]"))
        #expect(!text.contains("old_driver_id"))
    }

    @Test(arguments: [
        "", "null", "[]", "{}", "{\"v\":2,\"events\":[]}", "{\"v\":\"1\",\"events\":[]}", "{\"events\":[]}",
        "{\"v\":1}", "{\"v\":1,\"events\":{}}", "{\"v\":1,\"events\":[{}]}", "\u{0}\u{ff}garbage",
        "{\"v\":1,\"events\":[" + String(repeating: "[", count: 100_000),
    ])
    func malformedBatchesAreErrors(text: String) {
        #expect(throws: BrokerError.self) { try BrokerWireFormat.decode(Array(text.utf8)) }
    }

    /// A kind of event a newer release added (a rolling upgrade: a newer node's relay published it)
    /// is read, not refused: the node passes it on under its name (`OrderEventType`).
    @Test func aNewerReleasesKindOfEventIsReadUnderItsName() throws {
        var events = sampleEvents(1...2)
        events[0].event.type = try #require(OrderEventType(rawValue: "order_archived"))
        let decoded = try BrokerWireFormat.decode(BrokerWireFormat.encode(events))
        #expect(decoded == events)
        #expect(decoded[0].event.type.rawValue == "order_archived")
        #expect(decoded[0].cursor == events[0].cursor)
    }

    /// Each field of a valid event, broken in turn, makes the whole batch an error.
    @Test func invalidFieldsAreErrors() throws {
        let valid = String(decoding: BrokerWireFormat.encode(sampleEvents(2...2)), as: UTF8.self)
        #expect(try BrokerWireFormat.decode(Array(valid.utf8)).count == 1)
        let breakages = [
            ("\"id\":2", "\"id\":0"), ("\"id\":2", "\"id\":-2"), ("\"id\":2", "\"id\":2.5"),
            ("\"id\":2", "\"id\":99999999999999999999"), ("\"type\":\"order_", "\"type\":\"x"),
            ("\"type\":\"order_", "\"type\":\"order_X"), ("\"type\":\"order_", "\"type\":\"order_\\u0022"),
            // No salt: a node older than salts published it (its copy of a salted event has the
            // wrong check); the batch is skipped and the feed reads the store.
            ("\"salt\":", "\"sault\":"), ("\"salt\":0", "\"salt\":-1"),
            ("\"new_status\":\"", "\"new_status\":\"x"), ("\"company_3\"", "\"company_x\""),
            ("[\"company_3\",\"fleet_3\",\"driver_102\"]", "[]"), ("\"driver_id\":102", "\"driver_id\":0"),
            ("\"committed_at\":1764547200079", "\"committed_at\":\"soon\""), ("\"number\":", "\"numero\":"),
        ]
        for (from, to) in breakages {
            #expect(valid.contains(from), "sample lacks \(from)")
            let broken = valid.replacingOccurrences(of: from, with: to)
            #expect(throws: BrokerError.self, "\(to)") { try BrokerWireFormat.decode(Array(broken.utf8)) }
        }
    }

    /// A time the server could never have written (found by a review: a `committed_at` near 2⁶³
    /// decoded, then trapped every node's feed in the cursor's fingerprint; a `changed_at` near
    /// -2⁶³ trapped building the frame) is an error, as are ids out of order and oversize batches.
    @Test(arguments: ["9223372036854775807", "-9223372036854775808", "-1", "253402300800000"])
    func timesOutsideTheYears1970To9999AreErrors(millis: String) throws {
        let valid = String(decoding: BrokerWireFormat.encode(sampleEvents(2...2)), as: UTF8.self)
        for field in ["committed_at", "changed_at"] {
            guard let range = valid.range(of: "\"\(field)\":") else {
                Issue.record("sample lacks \(field)")
                continue
            }
            let digits = valid[range.upperBound...].prefix { $0.isNumber }
            let broken = valid.replacingOccurrences(of: "\"\(field)\":\(digits)", with: "\"\(field)\":\(millis)")
            #expect(throws: BrokerError.self, "\(field)=\(millis)") { try BrokerWireFormat.decode(Array(broken.utf8)) }
        }
    }

    @Test func theLastMillisecondOfYear9999IsAccepted() throws {
        var event = sampleEvents(2...2)[0]
        event.committedAt = BrokerWireFormat.date(milliseconds: 253_402_300_799_999)
        let decoded = try BrokerWireFormat.decode(BrokerWireFormat.encode([event]))
        #expect(decoded.map(\.cursor) == [event.cursor])
        #expect(!EventFrame.json(decoded[0]).isEmpty)
    }

    @Test func idsNotStrictlyAscendingAreAnError() {
        let batch = sampleEvents(1...3)
        for broken in [[batch[1], batch[0], batch[2]], [batch[0], batch[0]]] {
            #expect(throws: BrokerError.self) { try BrokerWireFormat.decode(BrokerWireFormat.encode(broken)) }
        }
    }

    @Test func batchesPastTheCountOrSizeBoundAreErrors() {
        let many = sampleEvents(1...Int64(BrokerWireFormat.maxEvents + 1))
        #expect(throws: BrokerError.self) { try BrokerWireFormat.decode(BrokerWireFormat.encode(many)) }
        #expect(throws: BrokerError.self) {
            try BrokerWireFormat.decode(Array(repeating: UInt8(ascii: " "), count: BrokerWireFormat.maxBytes + 1))
        }
        #expect(throws: Never.self) { try BrokerWireFormat.decode(BrokerWireFormat.encode(Array(many.dropLast()))) }
    }

    /// Whatever `Date` a row or a message holds, its cursor and its frame never trap.
    @Test func extremeDatesNeverTrapCursorsOrFrames() {
        for seconds in [Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude, 9.3e15, -9.3e15, .nan, .infinity] {
            var event = sampleEvents(2...2)[0]
            event.committedAt = Date(timeIntervalSince1970: seconds)
            event.event.changedAt = Date(timeIntervalSince1970: seconds)
            #expect(!event.cursor.description.isEmpty)
            #expect(!EventFrame.json(event).isEmpty)
        }
    }

    @Test func unknownVersionIsNamedInTheError() {
        #expect(throws: BrokerError("unsupported wire format version 7")) {
            try BrokerWireFormat.decode(Array("{\"v\":7,\"whatever\":true}".utf8))
        }
    }

    @Test func randomBytesNeverCrashTheDecoder() {
        var random = SystemRandomNumberGenerator()
        let valid = BrokerWireFormat.encode(sampleEvents(1...4))
        var rejected = 0
        for round in 0..<2000 {
            var bytes = valid
            for _ in 0...(round % 8) {
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            if round % 3 == 0 { bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &random))) }
            do {
                _ = try BrokerWireFormat.decode(bytes)
            } catch {
                #expect(error is BrokerError)
                rejected += 1
            }
        }
        #expect(rejected > 1000)
    }

    /// The decoder that replaced `JSONDecoder` reads every batch as it did — same refusals, same
    /// events — except in the categories of `KnownJSONDifference` (a trailing comma, UTF-16/32,
    /// numbers past `Double`'s exactness), where it must refuse what is not RFC 8259 JSON: hand-made
    /// variants (member order, duplicate and unknown keys, `null` optionals, numbers written
    /// otherwise, whitespace), then thousands of random corruptions.
    @Test func theDecoderAgreesWithJSONDecoderOnEveryBatch() {
        var accepted = 0
        func agree(_ bytes: [UInt8]) -> Bool {
            let new = try? BrokerWireFormat.decode(bytes)
            if new != nil { accepted += 1 }
            return same(bytes, new)
        }
        func same(_ bytes: [UInt8], _ new: [StoredEvent]?) -> Bool {
            if new == (try? ReferenceWireDecoder.decode(bytes)) { return true }
            switch KnownJSONDifference.of(bytes) {
            case .trailingComma?, .notUTF8?: return new == nil
            case .inexactNumber?:
                // Nothing else in the document may differ.
                let exact = KnownJSONDifference.withInexactNumbersReplaced(bytes)
                return same(exact, try? BrokerWireFormat.decode(exact))
            case nil: return false
            }
        }
        let valid = String(decoding: BrokerWireFormat.encode(sampleEvents(1...3)), as: UTF8.self)
        let id = "\"id\":2,"
        let status = "\"new_status\""
        let edits: [(String, String)] = [
            (id, "\"id\":2,\"id\":9,"),
            (id, "\"extra\":{\"a\":[1,2.5,null]},\"id\":2,"),
            (id, "\"id\":2.0,"), (id, "\"id\":2e0,"), (id, "\"id\":20e-1,"), (id, "\"id\":null,"), (id, "\"id\":\"2\","),
            (status, "\"driver_id\":null,\"old_status\":null," + status),
            (status, "\"seen_version\":null," + status),
            (status, "\"old_status\":\"nope\"," + status),
            (status, "\"old_status\":7," + status),
            (status, "\"seen_version\":0," + status),
            ("\"groups\":[", "\"groups\":[null,"),
            ("\"v\":1", "\"v\":1.0"), ("\"v\":1", "\"v\":true"),
            (",", " ,\n\t"), (":", "\r: "),
        ]
        var variants: [String] = [valid, valid + " ", valid + "x", "\u{FEFF}" + valid, valid.replacingOccurrences(of: "]}]}", with: "],}]}")]
        variants += edits.map { valid.replacingOccurrences(of: $0.0, with: $0.1) }
        // The version last instead of first.
        let versionLast = valid.replacingOccurrences(of: "{\"v\":1,\"events\":", with: "{\"events\":")
        variants.append(String(versionLast.dropLast()) + ",\"v\":1}")
        for variant in variants {
            #expect(agree(Array(variant.utf8)), "\(variant)")
        }
        var random = SeededGenerator(seed: 20261204)
        let bytes = Array(valid.utf8)
        for round in 0..<4000 {
            let mutated = random.corrupted(bytes, edits: 1 + round % 4)
            #expect(agree(mutated), "\(String(decoding: mutated, as: UTF8.self))")
        }
        // Not only refusals agree: some corruptions (in a number, a string, whitespace) still decode.
        #expect(accepted > 100, "\(accepted) accepted")
    }

    /// Numbers are read exactly: an id that is not a whole `Int64` is refused even where
    /// `JSONDecoder`'s limited precision made it one, and a whole one is read even where that
    /// precision pushed it past `Int64`. UTF-16 batches, which no node writes, are refused.
    @Test func numbersAreReadExactlyWhereJSONDecoderRounded() throws {
        let valid = String(decoding: BrokerWireFormat.encode(sampleEvents(1...3)), as: UTF8.self)
        for (number, exact) in [
            ("3.0000000000000001", nil), ("3.00000000000000000000000001e0", nil), ("9007199254740993.5", nil),
            ("9223372036854775807.0", Int64.max),
        ] {
            // The last event's id, so a larger one keeps the ids ascending.
            let batch = Array(valid.replacingOccurrences(of: "\"id\":3,", with: "\"id\":\(number),").utf8)
            #expect(KnownJSONDifference.of(batch) == .inexactNumber)
            let read = try? BrokerWireFormat.decode(batch)
            #expect(read?[2].id.rawValue == exact, "\(number)")
            #expect((read == nil) != (exact != nil), "\(number): refused exactly when not a whole Int64")
            let rounded = try? ReferenceWireDecoder.decode(batch)
            #expect((rounded == nil) == (exact != nil), "\(number): JSONDecoder rounded it the other way")
        }
        // `JSONDecoder` reads an exponent past Double's range as 0 (or infinity).
        #expect(KnownJSONDifference.of(Array("[1e-400]".utf8)) == .inexactNumber)
        #expect(KnownJSONDifference.of(Array("[1e-300,3.00000000000001,\"1e-400,\"]".utf8)) == nil)
        let replaced = KnownJSONDifference.withInexactNumbersReplaced(Array(#"[1e-400,"a\"2.00000000000000001",-2.00000000000000001e0,3.5]"#.utf8))
        #expect(String(decoding: replaced, as: UTF8.self) == #"[1,"a\"2.00000000000000001",1,3.5]"#)
        let utf16 = Array(valid.utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        #expect(KnownJSONDifference.of(utf16) == .notUTF8)
        #expect((try? ReferenceWireDecoder.decode(utf16)) != nil, "JSONDecoder reads UTF-16")
        #expect(throws: BrokerError.self) { try BrokerWireFormat.decode(utf16) }
    }
}
