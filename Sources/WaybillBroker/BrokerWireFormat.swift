public import Foundation
public import WaybillDomain
import WaybillJSON

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
/// - `salt`, the event's cursor secret (`StoredEvent.salt`, 0 for an event stored before salts),
///   is always written and required: a batch without it comes from an older node.
/// - Optional fields (`old_status`, `driver_id`, `old_driver_id`, `seen_version`) are omitted when absent; groups go by
///   their wire names (`company_1`, `driver_7`).
///
/// Decoding is strict: event types that are not `order_` names (a newer release's kind is read:
/// `OrderEventType`), unknown statuses or groups, non-positive ids, ids not strictly
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
    /// JSON values a batch may hold: an event is about 20 (its fields and groups), so this is
    /// far above any batch a node writes, and a hostile message stops parsing here instead of
    /// building millions of values first.
    static let maxValues = maxEvents * 64 + 16
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
    ///
    /// Read with `JSONReader` into a small tree, then field by field: every node decodes every
    /// batch, and Foundation's `JSONDecoder` (which parsed the batch twice, for the version and for
    /// the events) was about 10 % of a node's CPU at 1 000 writes/s (docs/BENCHMARKS.md). The rules
    /// are `JSONDecoder`'s for these types: the first member with a key counts, unknown keys are
    /// ignored, an optional field may be absent or `null`. Where `JSONDecoder` was looser it is
    /// strict (docs/DESIGN.md): only RFC 8259 JSON in UTF-8 (no trailing comma, no UTF-16/32), and
    /// a number is an integer only if its exact value is a whole `Int64` (`JSONDecoder` read long
    /// fractions with limited precision, so it took `2.0000000000000001` as 2 and refused
    /// `9223372036854775807.0`). No node writes anything these rules refuse.
    /// - Throws: `BrokerError` naming what is wrong (never the payload itself).
    public static func decode(_ bytes: [UInt8]) throws -> [StoredEvent] {
        guard bytes.count <= maxBytes else { throw BrokerError("batch too large (\(bytes.count) bytes)") }
        let document: JSONValue
        do {
            document = try JSONReader.parse(bytes, maximumValues: maxValues)
        } catch {
            throw BrokerError("undecodable batch: not JSON")
        }
        let batch = try WireObject(document, path: "")
        let v = try batch.integer("v")
        guard v == Int64(version) else { throw BrokerError("unsupported wire format version \(v)") }
        let items = try batch.array("events")
        guard items.count <= maxEvents else { throw BrokerError("batch of \(items.count) events, more than \(maxEvents)") }
        var events: [StoredEvent] = []
        events.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            let event = try self.event(WireObject(item, path: "events.\(index)"))
            if let earlier = events.last, event.id <= earlier.id {
                throw BrokerError("event ids not ascending (\(earlier.id), then \(event.id))")
            }
            events.append(event)
        }
        return events
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
        // The cursor's secret (nodes only, never a client), 0 included: a batch without it comes
        // from a node older than salts, whose copy of a salted event has the wrong check.
        text += ",\"salt\":\(stored.salt)"
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

    private static func event(_ fields: WireObject) throws -> StoredEvent {
        let names = try fields.array("groups").enumerated().map { index, value in
            guard case .string(let name) = value else { throw fields.invalid("groups.\(index)", "wrong type") }
            return name
        }
        let groups = names.compactMap(Group.init(name:))
        guard !groups.isEmpty, groups.count == names.count else { throw fields.invalid("groups", "bad groups") }
        guard let type = OrderEventType(rawValue: try fields.string("type")) else { throw fields.invalid("type", "invalid") }
        guard let newStatus = OrderStatus(rawValue: try fields.string("new_status")) else {
            throw fields.invalid("new_status", "invalid")
        }
        var oldStatus: OrderStatus?
        if let text = try fields.optionalString("old_status") {
            guard let status = OrderStatus(rawValue: text) else { throw fields.invalid("old_status", "invalid") }
            oldStatus = status
        }
        let event = OrderEvent(
            type: type,
            companyID: CompanyID(try fields.positive("company_id")),
            orderID: OrderID(try fields.positive("order_id")),
            number: try fields.string("number"),
            oldStatus: oldStatus,
            newStatus: newStatus,
            driverID: try fields.optionalPositive("driver_id").map(UserID.init),
            oldDriverID: try fields.optionalPositive("old_driver_id").map(UserID.init),
            changedAt: try fields.time("changed_at"),
            groups: groups,
            seenVersion: try fields.optionalPositive("seen_version").map { Int($0) })
        // No salt: published by a node older than salts (a rolling upgrade), which read the event
        // without it, so its cursor here would differ from the store's and the feed would take
        // that for a rewind and close every socket with 1012 (a review, 2026-12-05). Refused, the
        // batch is `.skipped`, and the feed reads those events from the store at once.
        let salt = try fields.integer("salt")  // "missing" for a publisher older than salts
        guard salt >= 0 else { throw fields.invalid("salt", "negative") }
        return StoredEvent(
            id: EventID(try fields.positive("id")), event: event, committedAt: try fields.time("committed_at"), salt: salt)
    }

    /// The members of one JSON object of a batch, read as `JSONDecoder`'s keyed container would.
    private struct WireObject {
        let members: [JSONValue.Member]
        /// Where the object sits in the batch (`events.3`), for the errors.
        let path: String

        init(_ value: JSONValue, path: String) throws {
            guard case .object(let members) = value else {
                throw BrokerError("undecodable batch: wrong type\(path.isEmpty ? "" : " at \(path)")")
            }
            self.members = members
            self.path = path
        }

        func invalid(_ key: String, _ what: String) -> BrokerError {
            BrokerError("undecodable batch: \(what) at \(path.isEmpty ? key : "\(path).\(key)")")
        }

        /// The first member named `key`; `nil` when absent or `null`.
        private func value(_ key: String) -> JSONValue? {
            guard let member = members.first(where: { $0.key == key }), member.value != .null else { return nil }
            return member.value
        }

        private func required(_ key: String) throws -> JSONValue {
            if let value = value(key) { return value }
            throw invalid(key, members.contains { $0.key == key } ? "null" : "missing")
        }

        func integer(_ key: String) throws -> Int64 {
            guard case .integer(let value) = try required(key) else { throw invalid(key, "wrong type") }
            return value
        }

        func positive(_ key: String) throws -> Int64 {
            let value = try integer(key)
            guard value > 0 else { throw invalid(key, "not positive") }
            return value
        }

        func optionalPositive(_ key: String) throws -> Int64? {
            value(key) == nil ? nil : try positive(key)
        }

        func string(_ key: String) throws -> String {
            guard case .string(let value) = try required(key) else { throw invalid(key, "wrong type") }
            return value
        }

        func optionalString(_ key: String) throws -> String? {
            value(key) == nil ? nil : try string(key)
        }

        func array(_ key: String) throws -> [JSONValue] {
            guard case .array(let value) = try required(key) else { throw invalid(key, "wrong type") }
            return value
        }

        /// Milliseconds since 1970 within years 1970–9999, as the date `decode` gives.
        func time(_ key: String) throws -> Date {
            let value = try integer(key)
            guard (0...BrokerWireFormat.latestMilliseconds).contains(value) else { throw invalid(key, "out of range") }
            return BrokerWireFormat.date(milliseconds: value)
        }
    }
}
