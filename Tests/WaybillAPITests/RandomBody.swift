import WaybillTesting

/// Reproducible random request bodies for `RequestBodyDecodingTests`: well-formed JSON built from
/// the body types' keys and values of every JSON type (`body(for:)`), and byte-level mutations of
/// a body (`mutate`). A fixed seed keeps each run the same.
struct RandomBody {
    private var generator: SeededGenerator

    init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

    private mutating func next() -> UInt64 { generator.next() }

    private mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    private mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    private mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    static let strings = [
        #""""#, #""t""#, #""Pallets""#, #""pickup""#, #""delivery""#, #""stop""#, #""new""#, #""in_progress""#,
        #""fly""#, #""a@b.c""#, #""é🚚""#, #""\"\\\/\b\n\u00e9\ud83d\ude9a""#, #""2026-12-01T10:00:00.000Z""#,
    ]
    static let numbers = [
        "0", "-0", "3", "-7", "1.0", "1e2", "2.50E+1", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "1.5", "1e400", "-0.0", "12e-1",
    ]
    static let stageKinds = [#""pickup""#, #""delivery""#, #""stop""#, #""fly""#]
    static let statuses = [#""new""#, #""assigned""#, #""accepted""#, #""in_progress""#, #""completed""#, #""cancelled""#, #""done""#]
    static let keys = ["title", "notes", "driver_id", "stages", "status", "name", "kind", "email", "password", "id",
                       "address", "planned_at", "x", ""]

    /// A JSON object for a body of `kind` (`ReferenceBodies.kinds`, or "stage").
    mutating func body(for kind: String) -> String {
        let fields: [String] = switch kind {
        case "create": ["title", "notes", "driver_id", "stages"]
        case "patch": ["title", "notes", "stages"]
        case "status": ["status"]
        case "assign": ["driver_id"]
        case "document": ["name", "kind"]
        case "login": ["email", "password"]
        default: ["id", "kind", "address", "planned_at"]
        }
        var members: [String] = []
        for field in fields where chance(85) {
            let value = chance(85) ? fitting(field, in: kind) : any(depth: 0)
            members.append("\"\(field)\":\(value)")
        }
        for _ in 0..<below(3) { members.append("\"\(pick(Self.keys))\":\(any(depth: 0))") }
        // Shuffle (Fisher–Yates with this generator): member order must not matter.
        for index in members.indices.reversed() where index > 0 { members.swapAt(index, below(index + 1)) }
        return "{" + members.joined(separator: pick([",", " , ", ",\n"])) + "}"
    }

    /// A value of the type `field` wants, mostly valid.
    private mutating func fitting(_ field: String, in kind: String) -> String {
        switch field {
        case "driver_id", "id": pick(Self.numbers)
        case "status": pick(Self.statuses)
        case "kind" where kind == "stage": pick(Self.stageKinds)
        case "stages": "[" + (0..<below(4)).map { _ in chance(90) ? body(for: "stage") : any(depth: 1) }.joined(separator: ",") + "]"
        default: chance(10) ? "null" : pick(Self.strings)
        }
    }

    /// Any JSON value.
    private mutating func any(depth: Int) -> String {
        switch below(depth > 2 ? 5 : 7) {
        case 0: return "null"
        case 1: return pick(["true", "false"])
        case 2: return pick(Self.numbers)
        case 3, 4: return pick(Self.strings)
        case 5: return "[" + (0..<below(3)).map { _ in any(depth: depth + 1) }.joined(separator: ",") + "]"
        default:
            return "{" + (0..<below(3)).map { _ in "\"\(pick(Self.keys))\":\(any(depth: depth + 1))" }.joined(separator: ",") + "}"
        }
    }

    static let alphabet = Array(#"{}[]":,.-+eE0123456789 \ntruefalsn\ux"#.utf8) + [0xFF, 0x01, 0xC3]

    /// `bytes` with one to three random edits: a byte deleted, inserted or replaced, a span
    /// deleted or doubled.
    mutating func mutate(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        for _ in 0...below(3) {
            let at = below(bytes.count + 1)
            switch below(5) {
            case 0 where at < bytes.count: bytes.remove(at: at)
            case 1: bytes.insert(pick(Self.alphabet), at: at)
            case 2 where at < bytes.count: bytes[at] = pick(Self.alphabet)
            case 3 where at < bytes.count: bytes.removeSubrange(at..<min(bytes.count, at + 1 + below(6)))
            case 4 where at < bytes.count: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 1 + below(8))], at: at)
            default: bytes.insert(pick(Self.alphabet), at: at)
            }
        }
        return bytes
    }
}
