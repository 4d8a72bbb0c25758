import Foundation

/// A resume position that notices when history was rewritten (SPEC §4, "History can rewind").
///
/// A bare event id cannot tell a restored or failed-over database from the one a client saw:
/// the same ids come back for different events. The cursor adds `check`, 8 hex digits of a
/// hash of the stored event (id, type, order id, commit time in milliseconds, and the event's
/// secret `StoredEvent.salt`, which makes the check of an event one cannot see unguessable). A server whose
/// event under `id` has another fingerprint answers `reset` instead of a replay that would
/// silently skip events. Wire form: `"1234-0b7e55d1"`.
public struct EventCursor: Sendable, Hashable, CustomStringConvertible {
    public var id: EventID
    /// 8 lowercase hex digits.
    public var check: String

    public init(id: EventID, check: String) {
        self.id = id
        self.check = check
    }

    /// The cursor of a stored event (its fingerprint is computed when the event is made or changed).
    public init(of stored: StoredEvent) { self = stored.cursor }

    /// Before the first event: what a store with no events reports as its newest cursor.
    public static let origin = EventCursor(id: .zero, check: "00000000")

    /// Parses `"<id>-<8 hex>"`; `nil` for anything else (the handshake then treats it as absent).
    public init?(parsing text: String) {
        guard text.utf8.count <= 40, let dash = text.lastIndex(of: "-") else { return nil }
        let idText = text[..<dash], checkText = text[text.index(after: dash)...]
        guard let raw = Int64(idText), raw >= 0, checkText.utf8.count == 8,
            checkText.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        id = EventID(raw)
        check = String(checkText)
    }

    public var description: String { "\(id)-\(check)" }

    /// Whether `stored` is the event this cursor was taken from.
    public func matches(_ stored: StoredEvent) -> Bool { stored.id == id && stored.cursor.check == check }

    /// FNV-1a (32 bit) over `id|type|order|millis`, then `|salt` when the event has one: cheap,
    /// stable across platforms and releases. It tells two different histories apart; the salt, a
    /// 63-bit secret of the stored event, makes the 32 bits say nothing about the rest to whoever
    /// does not know it (every salt maps any `id|type|order|millis` to any check about equally).
    static func fingerprint(
        id: EventID, type: OrderEventType, orderID: OrderID, committedAt: Date, salt: Int64 = 0
    ) -> String {
        // To the nearest millisecond, not down: a time read back from a store as `ms / 1000` is
        // sometimes a hair below the exact value in binary floating point, and rounding down would
        // then give `ms - 1` and another fingerprint for the same stored event.
        let millis = committedAt.epochMilliseconds
        // The bytes of "\(id)|\(type)|\(orderID)|\(millis)", hashed as they are produced: every
        // event frame carries a cursor, and building the string cost more than the hash.
        var hash = FNV1a()
        hash.decimal(id.rawValue)
        hash.byte(0x7c)
        for byte in type.rawValue.utf8 { hash.byte(byte) }
        hash.byte(0x7c)
        hash.decimal(orderID.rawValue)
        hash.byte(0x7c)
        hash.decimal(millis)
        if salt != 0 {
            hash.byte(0x7c)
            hash.decimal(salt)
        }
        return hash.hex
    }
}

/// 32-bit FNV-1a, fed byte by byte.
struct FNV1a {
    private(set) var value: UInt32 = 0x811c_9dc5

    mutating func byte(_ byte: UInt8) {
        value ^= UInt32(byte)
        value = value &* 0x0100_0193
    }

    /// The bytes of `String(number)`: an optional minus sign, then the digits.
    mutating func decimal(_ number: Int64) {
        if number < 0 { byte(0x2d) }
        // The digits from the last, by a constant 10 (a multiply), then hashed from the first: the
        // divisions by a growing power of ten were about forty true divisions for a millisecond
        // time stamp, and every event's cursor and every order's tag hashes several numbers.
        var magnitude = number.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var count = 0
            repeat {
                digits[count] = 0x30 + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            while count > 0 {
                count -= 1
                byte(digits[count])
            }
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// 8 lowercase hex digits, zero-padded.
    var hex: String {
        // Written straight into the (small, inline) string: no array in between (every event's cursor).
        String(unsafeUninitializedCapacity: 8) { out in
            for index in 0..<8 { out[index] = Self.hexDigits[Int((value >> UInt32(28 - 4 * index)) & 0xf)] }
            return 8
        }
    }
}

extension Order {
    /// 8 hex digits naming this version of the order in its history: a hash of its id, version and
    /// `updatedAt` (whole milliseconds, strictly increasing with the version within one history).
    ///
    /// After a restore or a failover that lost commits the same version number comes back for
    /// other content; its `updatedAt` differs (written later), so its check does too. The order's
    /// ETag carries it (`"o42-v7-h0b7e55d1"`), and an `If-Match` naming the version of another
    /// history is refused (docs/PROTOCOL.md, "Lost updates"), as SPEC §4's cursors do for events.
    public var versionCheck: String {
        var hash = FNV1a()
        hash.decimal(id?.rawValue ?? 0)
        hash.byte(0x7c)
        hash.decimal(Int64(version))
        hash.byte(0x7c)
        hash.decimal(updatedAt.epochMilliseconds)
        return hash.hex
    }
}
