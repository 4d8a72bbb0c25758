import Foundation
import WaybillClient

/// One line typed to `waybill driver`: plain words (`accept 42`) or an action as JSON
/// (`{"action":"status","order":42,"status":"accepted"}`, the shape `DriverAction` codes).
enum DriverCommandLine: Equatable {
    case none, quit, refresh
    case open(OrderID)
    case close(OrderID)
    case action(DriverAction)

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    static let usage =
        "try: open ID, close ID, accept ID, start ID, complete ID, stage ID SID, document ID KIND NAME, refresh, quit"

    init(_ line: String) throws(Problem) {
        let text = line.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("{") {
            do {
                self = .action(try JSONDecoder().decode(DriverAction.self, from: Data(text.utf8)))
            } catch {
                throw Problem(description: "not an action: \(text) — \(Self.reason(error))")
            }
            return
        }
        let words = text.split(separator: " ").map(String.init)
        guard let verb = words.first?.lowercased() else {
            self = .none
            return
        }
        let arguments = Array(words.dropFirst())
        let order = arguments.first.flatMap(Int64.init).map(OrderID.init)
        switch (verb, order, arguments.count) {
        case ("quit", _, _), ("exit", _, _): self = .quit
        case ("refresh", _, _): self = .refresh
        case ("open", let id?, 1): self = .open(id)
        case ("close", let id?, 1): self = .close(id)
        case ("accept", let id?, 1): self = .action(.changeStatus(of: id, to: .accepted))
        case ("start", let id?, 1): self = .action(.changeStatus(of: id, to: .inProgress))
        case ("complete", let id?, 1): self = .action(.changeStatus(of: id, to: .completed))
        case ("stage", let id?, 2):
            guard let stage = Int64(arguments[1]) else { throw Problem(description: "stage ID SID: SID is a number") }
            self = .action(.completeStage(StageID(stage), of: id))
        case ("document", let id?, 3...):
            let name = arguments[2...].joined(separator: " ")
            self = .action(.attachDocument(name: name, kind: arguments[1], to: id))
        default:
            throw Problem(description: "unknown command '\(text)' — \(Self.usage)")
        }
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context), DecodingError.typeMismatch(_, let context),
            DecodingError.valueNotFound(_, let context):
            context.debugDescription
        case DecodingError.keyNotFound(let key, _): "missing \"\(key.stringValue)\""
        default: "malformed JSON"
        }
    }
}
