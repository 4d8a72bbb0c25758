import WaybillDomain
import WaybillJSON

/// Client → server frames (SPEC §4): `{"type":"ping"}`, and from drivers
/// `{"type":"seen","orders":[{"id":42,"version":5}]}`. Anything else is ignored.
enum ClientFrame: Equatable {
    case ping
    /// The versions a driver's device now shows: at most `maxSeenOrders` entries, each with a
    /// positive id and version.
    case seen([SeenReport])
    /// Unknown, malformed or oversize: ignored, never an error (SPEC §4).
    case ignored

    /// Entries of one `seen` frame beyond this are ignored (a 4 KiB frame holds about 120).
    static let maxSeenOrders = 100

    /// Read with `JSONReader` (a driver sends a `seen` frame for each change it shows, so this
    /// runs about once per event a driver gets), by `JSONDecoder`'s rules for the types it
    /// replaced: the first member of a key counts, unknown keys are ignored. Stricter where it was
    /// looser (docs/DESIGN.md): a frame that is not RFC 8259 JSON (a trailing comma) is ignored, and
    /// an integer is a number whose exact value is whole (`JSONDecoder` read long fractions with
    /// limited precision, taking `42.0000000000000001` as 42).
    static func parse(_ text: String) -> ClientFrame {
        // The common case costs a string comparison, no JSON parse.
        if text == #"{"type":"ping"}"# { return .ping }
        guard text.utf8.count <= 8192, let frame = try? JSONReader.parse(Array(text.utf8)),
            case .string(let type)? = frame["type"]
        else { return .ignored }
        switch type {
        case "ping":
            return .ping
        case "seen":
            // Strict: one entry that is not {"id": <integer>, "version": <integer>} voids the frame,
            // even past the first `maxSeenOrders`.
            guard case .array(let entries)? = frame["orders"] else { return .ignored }
            var reports: [SeenReport] = []
            for (index, entry) in entries.enumerated() {
                guard case .integer(let id)? = entry["id"], case .integer(let version)? = entry["version"] else {
                    return .ignored
                }
                guard index < maxSeenOrders, id > 0, version > 0, version <= Int64(Int32.max) else { continue }
                reports.append(SeenReport(orderID: OrderID(id), version: Int(version)))
            }
            return reports.isEmpty ? .ignored : .seen(reports)
        default:
            return .ignored
        }
    }

    static func isPing(_ text: String) -> Bool { parse(text) == .ping }
}
