public import Foundation
public import WaybillDomain

/// How a batch of committed events crosses a network broker: compact, versioned JSON.
///
/// ```json
/// {"v":1,"events":[{"id":41,"type":"order_created","company_id":1,"order_id":7,"number":"A-7",
///   "new_status":"new","changed_at":1764547200123,"committed_at":1764547200125,"groups":["company_1","fleet_1"]}]}
/// ```
/// - `v` comes first and is checked first, so a later format can be rolled out next to this one
///   (nodes that do not know it skip its batches and refill from the outbox).
/// - Dates are integer milliseconds since 1970, to the nearest: the value the cursor fingerprint and
///   the event frames are computed from, so `cursor` and every frame are identical on every node.
///   Decoding picks the date nearest to `ms / 1000` that gives `ms` again: plain `Double(ms) / 1000`
///   sits a hair below `ms` for about 4 % of millisecond values (measured over 5 million), and
///   rounding that down would change the cursor.
/// - Optional fields (`old_status`, `driver_id`, `old_driver_id`, `seen_version`) are omitted when absent; groups go by
///   their wire names (`company_1`, `driver_7`).
///
/// Decoding is strict: unknown event types, statuses or groups, non-positive ids, ids not strictly
/// ascending, a time outside years 1970–9999, more than `maxEvents` events or `maxBytes` bytes, no
/// groups, or a wrong version are errors, never a partial batch. It never traps on hostile bytes,
/// and nothing it returns can make a later step trap (a review found a `committed_at` near 2⁶³ that
/// decoded fine and then trapped every node's feed in the cursor's fingerprint).
public enum BrokerWireFormat {
    /// The version this build writes.
    public static let version = 1
    /// The most events one batch may carry: the relay publishes at most 512 at a time. A foreign
    /// batch of a few hundred thousand would otherwise cost the feed's sort under its lock.
    public static let maxEvents = 10_000
    /// The largest payload decoded (a batch of `maxEvents` events is about 2.5 MB); a larger one is
    /// skipped before it is copied or parsed.
    public static let maxBytes = 8 << 20
    /// The latest time an event may carry: the end of year 9999, in ms since 1970.
    static let latestMilliseconds: Int64 = 253_402_300_799_999

    /// The JSON bytes of `batch` (events keep their order).
    public static func encode(_ batch: [StoredEvent]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + batch.count * 240)
        out.append(contentsOf: Array("{\"v\":\(version),\"events\":[".utf8))
        for (index, stored) in batch.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            append(stored, to: &out)
        }
        out.append(contentsOf: Array("]}".utf8))
        return out
    }

    /// The events of a batch written by `encode`.
    /// - Throws: `BrokerError` naming what is wrong (never the payload itself).
    public static func decode(_ bytes: [UInt8]) throws -> [StoredEvent] {
        guard bytes.count <= maxBytes else { throw BrokerError("batch too large (\(bytes.count) bytes)") }
        let data = Data(bytes)
        let decoder = JSONDecoder()
        do {
            let header = try decoder.decode(Header.self, from: data)
            guard header.v == version else { throw BrokerError("unsupported wire format version \(header.v)") }
            let events = try decoder.decode(Batch.self, from: data).events.map(\.stored)
            guard events.count <= maxEvents else { throw BrokerError("batch of \(events.count) events, more than \(maxEvents)") }
            for (earlier, later) in zip(events, events.dropFirst()) where later.id <= earlier.id {
                throw BrokerError("event ids not ascending (\(earlier.id), then \(later.id))")
            }
            return events
        } catch let error as BrokerError {
            throw error
        } catch let error as DecodingError {
            throw BrokerError("undecodable batch: \(summary(of: error))")
        } catch {
            throw BrokerError("undecodable batch")
        }
    }

    // MARK: Encoding

    private static func append(_ stored: StoredEvent, to out: inout [UInt8]) {
        let event = stored.event
        var text = "{\"id\":\(stored.id.rawValue),\"type\":\"\(event.type.rawValue)\""
        text += ",\"company_id\":\(event.companyID.rawValue),\"order_id\":\(event.orderID.rawValue),\"number\":"
        out.append(contentsOf: Array(text.utf8))
        appendString(event.number, to: &out)
        text = ""
        if let old = event.oldStatus { text += ",\"old_status\":\"\(old.rawValue)\"" }
        text += ",\"new_status\":\"\(event.newStatus.rawValue)\""
        if let driver = event.driverID { text += ",\"driver_id\":\(driver.rawValue)" }
        if let oldDriver = event.oldDriverID { text += ",\"old_driver_id\":\(oldDriver.rawValue)" }
        if let seenVersion = event.seenVersion { text += ",\"seen_version\":\(seenVersion)" }
        text += ",\"changed_at\":\(milliseconds(of: event.changedAt))"
        text += ",\"committed_at\":\(milliseconds(of: stored.committedAt)),\"groups\":["
        text += event.groups.map { "\"\($0.name)\"" }.joined(separator: ",")
        text += "]}"
        out.append(contentsOf: Array(text.utf8))
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped, the rest as UTF-8.
    private static func appendString(_ value: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0f)])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    // MARK: Dates

    /// Milliseconds since 1970, to the nearest, as `EventCursor` computes them.
    public static func milliseconds(of date: Date) -> Int64 {
        // Nearest, like `EventCursor`'s fingerprint and the stores: a date rebuilt as `ms / 1000`
        // may sit a hair below `ms`, and rounding down would turn it into `ms - 1`.
        let value = (date.timeIntervalSince1970 * 1000).rounded()
        guard value.isFinite, abs(value) < 9.0e15 else { return 0 }
        return Int64(value)
    }

    /// The date nearest to `ms / 1000` whose `milliseconds(of:)` is `ms` again (a few ulps up at most):
    /// what `decode` gives, so an event built with it survives the round trip `==`.
    public static func date(milliseconds ms: Int64) -> Date {
        var date = Date(timeIntervalSince1970: Double(ms) / 1000)
        var steps = 0
        while milliseconds(of: date) < ms && steps < 16 {
            date = Date(timeIntervalSinceReferenceDate: date.timeIntervalSinceReferenceDate.nextUp)
            steps += 1
        }
        return date
    }

    // MARK: Decoding

    private static func summary(of error: DecodingError) -> String {
        let (context, what): (DecodingError.Context, String) =
            switch error {
            case .dataCorrupted(let c): (c, "invalid")
            case .keyNotFound(let key, let c): (c, "missing \(key.stringValue)")
            case .typeMismatch(_, let c): (c, "wrong type")
            case .valueNotFound(_, let c): (c, "null")
            @unknown default: (DecodingError.Context(codingPath: [], debugDescription: ""), "invalid")
            }
        let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        let text = path.isEmpty ? "\(what): \(context.debugDescription)" : "\(what) at \(path)"
        return String(text.prefix(200))
    }

    private struct Header: Decodable { var v: Int }

    private struct Batch: Decodable { var events: [WireEvent] }

    private struct WireEvent: Decodable {
        var stored: StoredEvent

        enum Key: String, CodingKey {
            case id, type, number, groups
            case companyID = "company_id", orderID = "order_id", oldStatus = "old_status", newStatus = "new_status"
            case driverID = "driver_id", oldDriverID = "old_driver_id", changedAt = "changed_at"
            case committedAt = "committed_at", seenVersion = "seen_version"
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Key.self)
            func positive(_ key: Key) throws -> Int64 {
                let value = try c.decode(Int64.self, forKey: key)
                guard value > 0 else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "not positive")
                }
                return value
            }
            func time(_ key: Key) throws -> Date {
                let value = try c.decode(Int64.self, forKey: key)
                guard (0...BrokerWireFormat.latestMilliseconds).contains(value) else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "out of range")
                }
                return BrokerWireFormat.date(milliseconds: value)
            }
            func optionalPositive(_ key: Key) throws -> Int64? {
                try c.decodeIfPresent(Int64.self, forKey: key) == nil ? nil : try positive(key)
            }
            let names = try c.decode([String].self, forKey: .groups)
            let groups = names.compactMap(Group.init(name:))
            guard !groups.isEmpty, groups.count == names.count else {
                throw DecodingError.dataCorruptedError(forKey: .groups, in: c, debugDescription: "bad groups")
            }
            let event = OrderEvent(
                type: try c.decode(OrderEventType.self, forKey: .type),
                companyID: CompanyID(try positive(.companyID)),
                orderID: OrderID(try positive(.orderID)),
                number: try c.decode(String.self, forKey: .number),
                oldStatus: try c.decodeIfPresent(OrderStatus.self, forKey: .oldStatus),
                newStatus: try c.decode(OrderStatus.self, forKey: .newStatus),
                driverID: try optionalPositive(.driverID).map(UserID.init),
                oldDriverID: try optionalPositive(.oldDriverID).map(UserID.init),
                changedAt: try time(.changedAt),
                groups: groups,
                seenVersion: try optionalPositive(.seenVersion).map { Int($0) })
            stored = StoredEvent(
                id: EventID(try positive(.id)), event: event,
                committedAt: try time(.committedAt))
        }
    }
}
