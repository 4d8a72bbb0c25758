import Foundation
import WaybillBroker
import WaybillDomain

/// The broker batch decoder as it was before `JSONReader` (Foundation's `JSONDecoder` and
/// `Decodable`), kept as the reference the new one must agree with: the same batches accepted,
/// the same events read (`BrokerWireFormatTests.theDecoderAgreesWithJSONDecoder…`).
enum ReferenceWireDecoder {
    static func decode(_ bytes: [UInt8]) throws -> [StoredEvent] {
        guard bytes.count <= BrokerWireFormat.maxBytes else { throw BrokerError("too large") }
        let data = Data(bytes)
        let decoder = JSONDecoder()
        let header = try decoder.decode(Header.self, from: data)
        guard header.v == BrokerWireFormat.version else { throw BrokerError("version") }
        let events = try decoder.decode(Batch.self, from: data).events.map(\.stored)
        guard events.count <= BrokerWireFormat.maxEvents else { throw BrokerError("count") }
        for (earlier, later) in zip(events, events.dropFirst()) where later.id <= earlier.id {
            throw BrokerError("order")
        }
        return events
    }

    private struct Header: Decodable { var v: Int }

    private struct Batch: Decodable { var events: [WireEvent] }

    private struct WireEvent: Decodable {
        var stored: StoredEvent

        enum Key: String, CodingKey {
            case id, type, number, groups
            case companyID = "company_id", orderID = "order_id", oldStatus = "old_status", newStatus = "new_status"
            case driverID = "driver_id", oldDriverID = "old_driver_id", changedAt = "changed_at"
            case committedAt = "committed_at", seenVersion = "seen_version", salt
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Key.self)
            func positive(_ key: Key) throws -> Int64 {
                let value = try c.decode(Int64.self, forKey: key)
                guard value > 0 else { throw BrokerError("not positive") }
                return value
            }
            func time(_ key: Key) throws -> Date {
                let value = try c.decode(Int64.self, forKey: key)
                guard (0...253_402_300_799_999).contains(value) else { throw BrokerError("out of range") }
                return BrokerWireFormat.date(milliseconds: value)
            }
            func nonNegative(_ key: Key) throws -> Int64 {
                let value = try c.decode(Int64.self, forKey: key)
                guard value >= 0 else { throw BrokerError("negative") }
                return value
            }
            func optionalPositive(_ key: Key) throws -> Int64? {
                try c.decodeIfPresent(Int64.self, forKey: key) == nil ? nil : try positive(key)
            }
            let names = try c.decode([String].self, forKey: .groups)
            let groups = names.compactMap(Group.init(name:))
            guard !groups.isEmpty, groups.count == names.count else { throw BrokerError("groups") }
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
                id: EventID(try positive(.id)), event: event, committedAt: try time(.committedAt),
                salt: try nonNegative(.salt))
        }
    }
}
