import Foundation
import WaybillDomain

/// `POST /api/orders/` body.
struct CreateOrderRequest: Equatable {
    var title: String
    var notes: String?
    var driverID: Int64?
    var stages: [StageRequest]?
}

/// `PATCH /api/orders/{id}/` body: absent fields stay as they are.
struct PatchOrderRequest: Equatable {
    var title: String?
    var notes: String?
    var stages: [StageRequest]?
}

/// A stage in a create or patch body. `id` keeps an existing stage (and its completion).
struct StageRequest: Equatable {
    var id: Int64?
    var kind: StageKind
    var address: String
    var plannedAt: String?
}

struct StatusRequest: Equatable { var status: OrderStatus }

struct AssignRequest: Equatable {
    var driverID: Int64
}

struct DocumentRequest: Equatable {
    var name: String
    var kind: String
}

struct LoginRequest: Equatable {
    var email: String
    var password: String
    /// The role the caller serves (the panel: `dispatcher`): another role's login is refused
    /// before a token is made (PROTOCOL.md, "Answers where the SPEC is silent").
    var role: Role? = nil
}

/// Field rules that JSON types cannot express (422 `validation_error`).
enum Validation {
    static let maxTitle = 200, maxNotes = 10_000, maxStages = 100, maxAddress = 500, maxName = 200, maxKind = 50

    /// Whether `text` fits a limit of `characters`: in characters as a reader counts them, and in
    /// at most `bytesPerCharacter` UTF-8 bytes per character of the limit. One character may carry
    /// any number of combining marks ("a" and 300 000 accents is one): a character limit alone let
    /// 200 of them weigh a megabyte, on every list page and every write that reads the order. Real
    /// text stays far below 16: a Devanagari syllable with its vowel sign is 6 bytes, a Hangul
    /// syllable pasted decomposed 9, a family emoji 25 (as long as most of the text is not those).
    static let bytesPerCharacter = 16
    static func fits(_ text: String, _ characters: Int) -> Bool {
        // Within the limit in bytes is within it in characters (each has at least one): the usual
        // text needs no count of its characters, a walk over every grapheme boundary.
        let bytes = text.utf8.count
        return bytes <= characters || (bytes <= characters * bytesPerCharacter && text.count <= characters)
    }

    /// Text may hold any character but NUL: PostgreSQL cannot store it (and no sane title needs
    /// it), so both stores get the same answer, a 422, instead of a store failure.
    static func text(_ raw: String, field: String) throws -> String {
        var bytes = raw
        guard !bytes.withUTF8({ $0.contains(0) }) else { throw ValidationError(field: field, problem: "must not contain NUL characters") }
        return raw
    }

    /// The longest address SMTP can carry (RFC 5321): longer is no one's email, and past about
    /// 2 700 bytes PostgreSQL's index on the login throttle's key cannot hold it.
    static let maxEmailBytes = 254

    /// A login's email: it goes into the store (the throttle's key, the lookup) before anything
    /// else can refuse it, so text no store can hold is a 422 here, on every store alike.
    static func email(_ raw: String) throws -> String {
        _ = try text(raw, field: "email")
        guard raw.utf8.count <= maxEmailBytes else {
            throw ValidationError(field: "email", problem: "at most \(maxEmailBytes) bytes")
        }
        return raw
    }

    static func title(_ raw: String) throws -> String {
        let title = try text(raw, field: "title").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !title.isEmpty else { throw ValidationError(field: "title", problem: "must not be empty") }
        guard fits(title, maxTitle) else {
            throw ValidationError(field: "title", problem: "at most \(maxTitle) characters (\(maxTitle * bytesPerCharacter) bytes)")
        }
        return title
    }

    static func notes(_ raw: String) throws -> String {
        _ = try text(raw, field: "notes")
        guard fits(raw, maxNotes) else {
            throw ValidationError(field: "notes", problem: "at most \(maxNotes) characters (\(maxNotes * bytesPerCharacter) bytes)")
        }
        return raw
    }

    static func stages(_ raw: [StageRequest]) throws -> [Stage] {
        guard raw.count <= maxStages else { throw ValidationError(field: "stages", problem: "at most \(maxStages) stages") }
        let ids = raw.compactMap(\.id)
        guard Set(ids).count == ids.count else { throw ValidationError(field: "stages", problem: "a stage id appears twice") }
        return try raw.enumerated().map { index, stage in
            let address = try text(stage.address, field: "stages.\(index).address")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard !address.isEmpty, fits(address, maxAddress) else {
                throw ValidationError(
                    field: "stages.\(index).address", problem: "1 to \(maxAddress) characters (\(maxAddress * bytesPerCharacter) bytes)")
            }
            var planned: Date?
            if let text = stage.plannedAt {
                guard let date = Timestamp.parse(text) else {
                    throw ValidationError(field: "stages.\(index).planned_at", problem: "must be an ISO 8601 time")
                }
                planned = date
            }
            return Stage(id: stage.id.map(StageID.init), position: index + 1, kind: stage.kind, address: address, plannedAt: planned)
        }
    }

    static func document(_ raw: DocumentRequest, at now: Date) throws -> Document {
        let name = try text(raw.name, field: "name").trimmingCharacters(in: .whitespacesAndNewlines)
        let kind = try text(raw.kind, field: "kind").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, fits(name, maxName) else {
            throw ValidationError(field: "name", problem: "1 to \(maxName) characters (\(maxName * bytesPerCharacter) bytes)")
        }
        guard !kind.isEmpty, fits(kind, maxKind) else {
            throw ValidationError(field: "kind", problem: "1 to \(maxKind) characters (\(maxKind * bytesPerCharacter) bytes)")
        }
        return Document(name: name, kind: kind, createdAt: now)
    }
}
