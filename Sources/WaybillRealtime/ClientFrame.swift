import Foundation
import WaybillDomain

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

    static func parse(_ text: String) -> ClientFrame {
        // The common case costs a string comparison, no JSON parse.
        if text == #"{"type":"ping"}"# { return .ping }
        guard text.utf8.count <= 8192, let data = text.data(using: .utf8),
            let head = try? JSONDecoder().decode(Head.self, from: data)
        else { return .ignored }
        switch head.type {
        case "ping":
            return .ping
        case "seen":
            // Strict: one entry that is not {"id": <integer>, "version": <integer>} voids the frame.
            guard let frame = try? JSONDecoder().decode(Seen.self, from: data) else { return .ignored }
            let reports = frame.orders.prefix(maxSeenOrders).compactMap { entry -> SeenReport? in
                guard entry.id > 0, entry.version > 0, entry.version <= Int(Int32.max) else { return nil }
                return SeenReport(orderID: OrderID(entry.id), version: entry.version)
            }
            return reports.isEmpty ? .ignored : .seen(reports)
        default:
            return .ignored
        }
    }

    static func isPing(_ text: String) -> Bool { parse(text) == .ping }

    private struct Head: Decodable { var type: String }

    private struct Seen: Decodable {
        struct Entry: Decodable {
            var id: Int64
            var version: Int
        }
        var orders: [Entry]
    }
}
