import Foundation
import Testing
import WaybillDomain
import WaybillNetwork

@testable import WaybillAPI

/// Request bodies read by `JSONReader` + `BodyFields` give the same values and the same API errors
/// (status, code, message) as `JSONDecoder` did before (docs/BENCHMARKS.md, "JSONDecoder in the
/// write path"). The reference is the old path, kept here: `ReferenceBodies` (the old `Decodable`
/// types) through `JSONDecoder`, and its `DecodingError` through `APIError`.
@Suite struct RequestBodyDecodingTests {
    /// What a body became: the value (compared by its printed form, so strings compare byte for
    /// byte, not by Unicode equivalence) or the client's error.
    enum Outcome: Equatable, CustomStringConvertible {
        case value(String)
        case error(status: Int, code: String, message: String)

        init<Value>(_ body: () throws -> Value) {
            do {
                self = .value(String(reflecting: try body()))
            } catch {
                let api = APIError(error)
                self = .error(status: api.status, code: api.code, message: api.message)
            }
        }

        var description: String {
            switch self {
            case .value(let text): text
            case .error(let status, let code, let message): "\(status) \(code): \(message)"
            }
        }

        static let notAnInteger = Outcome.error(status: 400, code: "invalid_field", message: "driver_id must be an integer.")
        static let malformed = Outcome.error(status: 400, code: "malformed_json", message: "The body is not valid JSON.")

        /// The same answer, but for the one change made on purpose: a number an integer field cannot
        /// hold (`1.5`, `1e400`) in a body that is valid JSON was `malformed_json` from `JSONDecoder`
        /// and is "… must be an integer." now (the new reader reads the whole document first, so
        /// that answer means the JSON was valid).
        func agrees(withReference old: Outcome) -> Bool {
            if self == old { return true }
            guard old == .malformed, case .error(400, "invalid_field", let message) = self else { return false }
            return message.hasSuffix(" must be an integer.")
        }
    }

    /// The body type `kind` names (`ReferenceBodies.kinds`), decoded both ways.
    static func outcomes(_ kind: String, _ body: [UInt8]) -> (new: Outcome, old: Outcome) {
        let request = HTTPRequest(method: "POST", path: "/", body: body)
        func both<New: JSONBodyDecodable, Old: Decodable>(_: New.Type, _: Old.Type, _ convert: (Old) -> New) -> (Outcome, Outcome) {
            (Outcome { try JSONCoding.decode(New.self, from: request) },
             Outcome { convert(try ReferenceBodies.decode(Old.self, from: body)) })
        }
        switch kind {
        case "create": return both(CreateOrderRequest.self, ReferenceBodies.Create.self, \.request)
        case "patch": return both(PatchOrderRequest.self, ReferenceBodies.Patch.self, \.request)
        case "status": return both(StatusRequest.self, ReferenceBodies.Status.self, \.request)
        case "assign": return both(AssignRequest.self, ReferenceBodies.Assign.self, \.request)
        case "document": return both(DocumentRequest.self, ReferenceBodies.Document.self, \.request)
        default: return both(LoginRequest.self, ReferenceBodies.Login.self, \.request)
        }
    }

    @Test(arguments: RequestBodyCorpus.cases)
    func givesWhatJSONDecoderGave(_ sample: RequestBodyCorpus.Sample) {
        let (new, old) = Self.outcomes(sample.kind, Array(sample.body.utf8))
        #expect(new.agrees(withReference: old), "\(sample.kind) \(sample.body)")
    }

    /// The corpus holds both answers and errors of every kind, so the comparison above means something.
    @Test func corpusCoversValuesAndEveryError() {
        let outcomes = RequestBodyCorpus.cases.map { Self.outcomes($0.kind, Array($0.body.utf8)).new.description }
        #expect(outcomes.contains { $0.hasPrefix("WaybillAPI.CreateOrderRequest(") && $0.contains("StageRequest(") })
        for kind in ["PatchOrderRequest(", "StatusRequest(", "AssignRequest(", "DocumentRequest(", "LoginRequest("] {
            #expect(outcomes.contains { $0.hasPrefix("WaybillAPI." + kind) }, "no value of \(kind)")
        }
        for words in ["malformed_json", "missing_field", "must be a string", "must be an integer", "must be an array",
                      "must be of a different type", "has an invalid value", "The body must be a JSON object."] {
            #expect(outcomes.contains { $0.contains(words) }, "no \(words)")
        }
    }

    /// Random well-formed bodies (`RandomBody`): keys of every body type and unknown ones,
    /// duplicates, nulls, every JSON type, stage arrays. Both paths must agree on each.
    @Test func randomWellFormedBodiesAgree() {
        var random = RandomBody(seed: 0x5EED_B0D1)
        var values = 0
        for round in 0..<3_000 {
            let kind = ReferenceBodies.kinds[round % ReferenceBodies.kinds.count]
            let body = random.body(for: kind)
            let (new, old) = Self.outcomes(kind, Array(body.utf8))
            #expect(new.agrees(withReference: old), "\(kind) \(body)")
            if case .value = new { values += 1 }
        }
        #expect(values > 100, "too few bodies decoded to compare values: \(values)")
    }

    /// Byte-level mutations of the corpus. The new reader is stricter than `JSONDecoder` (see
    /// `deliberateDifferences`), so only where it accepts the JSON must the two agree exactly.
    @Test func mutatedBodiesAgreeWhereTheReaderAcceptsThem() {
        var random = RandomBody(seed: 0xB17E_F11D)
        var compared = 0
        for round in 0..<6_000 {
            let sample = RequestBodyCorpus.cases[round % RequestBodyCorpus.cases.count]
            let body = random.mutate(Array(sample.body.utf8))
            let (new, old) = Self.outcomes(sample.kind, body)
            guard new != .malformed else { continue }
            compared += 1
            #expect(new.agrees(withReference: old), "\(sample.kind) \(String(decoding: body, as: UTF8.self))")
        }
        #expect(compared > 1_000, "only \(compared) mutated bodies were valid JSON")
    }

    /// Where the two differ on purpose: the old decoder accepted these, or read a number
    /// approximately; the new reader follows RFC 8259 and reads numbers exactly. Each is
    /// `malformed_json` now (docs/DESIGN.md, "Decisions where the SPEC is silent").
    @Test(arguments: [
        #"{"driver_id":3,}"#,  // trailing comma (object)
        #"{"driver_id":3,"x":[1,]}"#,  // trailing comma (array)
        #"{"driver_id":3,"x":"\q"}"#,  // bad escape in an unread string
        #"{"driver_id":3,"x":"\ud800"}"#,  // lone surrogate in an unread string
        "{\"driver_id\":3,\"x\":\"a\u{01}b\"}",  // control character in an unread string
        #"{"driver_id":3,"x":{"\q":1}}"#,  // bad escape in an unread key
    ])
    func deliberateDifferences(body: String) {
        let (new, old) = Self.outcomes("assign", Array(body.utf8))
        #expect(new == .malformed)
        #expect(old != .malformed, "JSONDecoder now refuses \(body) too: move it to the corpus")
    }

    @Test func invalidUTF8AndUTF16AreMalformedNow() {
        let unreadInvalid = Array(#"{"driver_id":3,"x":""#.utf8) + [0xFF] + Array(#""}"#.utf8)
        #expect(Self.outcomes("assign", unreadInvalid).new == .malformed)
        let utf16 = Array(#"{"driver_id":3}"#.utf16).flatMap { [UInt8(truncatingIfNeeded: $0), UInt8($0 >> 8)] }
        #expect(Self.outcomes("assign", utf16).new == .malformed)  // JSONDecoder guessed UTF-16; SPEC §2 says UTF-8
        let withMark = [0xEF, 0xBB, 0xBF] + Array(#"{"driver_id":3}"#.utf8)
        #expect(Self.outcomes("assign", withMark).new == .value("WaybillAPI.AssignRequest(driverID: 3)"))
    }

    /// Whole numbers written with a fraction or exponent stay accepted up to `Int64.max`, exactly
    /// (JSONDecoder went through `Double` and `Decimal` and stopped at 9223372036854775295).
    @Test func wholeNumbersReadExactly() {
        #expect(Self.outcomes("assign", Array(#"{"driver_id":9223372036854775807.0}"#.utf8)).new
            == .value("WaybillAPI.AssignRequest(driverID: 9223372036854775807)"))
        #expect(Self.outcomes("assign", Array(#"{"driver_id":9223372036854775808.0}"#.utf8)).new == .notAnInteger)
    }

    /// A number an integer field cannot hold, in valid JSON, names the field (it was
    /// `malformed_json`, "The body is not valid JSON.", which it is).
    /// `JSONDecoder` went through `Double` and read these two as 1 and 0; they are refused too.
    @Test(arguments: [#"{"driver_id":1.0000000000000001}"#, #"{"driver_id":1e-400}"#])
    func numbersJSONDecoderRoundedToAnIntegerAreNoIntegers(body: String) {
        let (new, old) = Self.outcomes("assign", Array(body.utf8))
        #expect(new == .notAnInteger)
        #expect(old != .malformed && old != .notAnInteger)
    }

    @Test(arguments: [#"{"driver_id":1.5}"#, #"{"driver_id":1e400}"#, #"{"driver_id":-0.5}"#, #"{"driver_id":9223372036854775808}"#])
    func aNumberThatIsNoIntegerNamesTheField(body: String) {
        let (new, old) = Self.outcomes("assign", Array(body.utf8))
        #expect(new == .notAnInteger)
        #expect(old == .malformed)
    }
}
