import Foundation
import Synchronization
import WaybillClient

/// How `waybill driver` shows what changed.
protocol DriverView: Sendable {
    func show(_ update: SessionUpdate)
    func error(_ message: String)
    /// A failure before the session started (login refused, queue locked), right before the exit.
    func startFailed(_ message: String)
}

/// The queued actions the view has been told about: which are still pending, per order.
struct PendingActions {
    private(set) var pending: [ActionID: QueuedAction] = [:]

    mutating func take(_ action: QueuedAction) {
        if action.state.isPending { pending[action.id] = action } else { pending[action.id] = nil }
    }

    var count: Int { pending.count }

    /// What an order's row shows on top of the server's status: `accepted — waiting for coverage`.
    func overlay(for id: OrderID) -> String? {
        let mine = pending.values.filter { $0.orderID == id }.sorted { $0.queuedAt < $1.queuedAt }
        guard let last = mine.last else { return nil }
        let what: String =
            switch last.action {
            case .changeStatus(_, let status): status.rawValue
            case .completeStage(let stage, _): "stage \(stage) done"
            case .attachDocument(let name, _, _): "document \(name)"
            }
        let extra = mine.count > 1 ? " (+\(mine.count - 1))" : ""
        return "\(what)\(extra) — \(last.state == .sending ? "sending" : "waiting for coverage")"
    }
}

/// One JSON object per line: `{"kind":"list"|"detail"|"detail_removed"|"connection"|"action"|"error", …}`.
/// Action lines also carry `"waiting"`: how many actions are still queued after this one's step.
final class JSONLinesView: DriverView {
    private let pending = Mutex(PendingActions())

    func show(_ update: SessionUpdate) {
        guard var object = (try? JSONSerialization.jsonObject(with: Data(update.jsonLine.utf8))) as? [String: Any],
            let type = object.removeValue(forKey: "type") as? String
        else { return }
        let kinds = ["orders": "list", "failure": "error"]
        object["kind"] = kinds[type] ?? type
        if case .action(let action) = update {
            object["waiting"] = pending.withLock { pending in
                pending.take(action)
                return pending.count
            }
        }
        emit(object)
    }

    func error(_ message: String) { emit(["kind": "error", "message": message]) }

    func startFailed(_ message: String) { error(message) }

    private func emit(_ object: [String: Any]) {
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        Console.write(data + Data("\n".utf8))
    }
}

/// A screen that redraws on every change: status line, the driver's orders, opened orders.
final class ScreenView: DriverView, @unchecked Sendable {  // state behind `lock`
    private let lock = NSLock()
    private let email: String
    private var orders: [OrderSummary] = []
    private var details: [OrderID: OrderDetail] = [:]
    private var connection = "connecting…"
    private var message = ""
    private var pending = PendingActions()
    private let output: @Sendable (Data) -> Void
    private let errorOutput: @Sendable (String) -> Void

    /// - Parameters:
    ///   - output: where each redrawn screen goes (stdout; a test keeps it).
    ///   - errorOutput: where a failure before the session goes (stderr).
    init(
        email: String, output: @escaping @Sendable (Data) -> Void = Console.write,
        errorOutput: @escaping @Sendable (String) -> Void = Console.error
    ) {
        self.email = email
        self.errorOutput = errorOutput
        self.output = output
    }

    func show(_ update: SessionUpdate) {
        lock.withLock {
            switch update {
            case .orders(let rows): orders = rows
            case .detail(let detail): details[detail.id] = detail
            case .detailRemoved(let id): details[id] = nil
            case .connection(let state): connection = Self.describe(state)
            case .failure(let error): message = "⚠ " + TerminalText.visible("\(error)")
            case .action(let action):
                pending.take(action)
                if case .refused(let reason) = action.state {
                    message = "⚠ not done: " + TerminalText.visible("\(action.action) — \(reason)")
                }
            }
            redraw()
        }
    }

    func error(_ text: String) {
        lock.withLock {
            message = "⚠ " + TerminalText.visible(text)
            redraw()
        }
    }

    /// One plain line on stderr, no screen: a cleared screen with an empty order list and a prompt
    /// the process no longer reads was the last thing the terminal showed (found by a review).
    func startFailed(_ text: String) { errorOutput("waybill driver: " + TerminalText.visible(text)) }

    private func redraw() {
        var screen = "\u{1B}[2J\u{1B}[H"
        let waiting = pending.count == 0 ? "" : " — \(pending.count) action\(pending.count == 1 ? "" : "s") waiting"
        screen += "Waybill driver — \(TerminalText.visible(email)) — \(connection)\(waiting)\n\n"
        screen += "  ID  NUMBER         STATUS       TITLE\n"
        for order in orders {
            screen +=
                "  " + pad("\(order.id)", 4) + pad(TerminalText.visible(order.number), 15) + pad(order.status.rawValue, 13)
                + TerminalText.visible(order.title)
            if let overlay = pending.overlay(for: order.id) { screen += "   → " + TerminalText.visible(overlay) }
            screen += "\n"
        }
        if orders.isEmpty { screen += "  (no orders)\n" }
        for detail in details.values.sorted(by: { $0.id < $1.id }) {
            screen += "\nOrder \(detail.id) " + TerminalText.visible("\(detail.number) — \(detail.title)")
                + " [\(detail.status.rawValue)]"
            if let overlay = pending.overlay(for: detail.id) { screen += " → " + TerminalText.visible(overlay) }
            screen += "\n"
            if !detail.notes.isEmpty {
                // Kept on their own lines, each indented: a line of the notes never starts at the margin.
                let lines = TerminalText.visible(detail.notes, keepingLineBreaks: true).split(separator: "\n", omittingEmptySubsequences: false)
                for line in lines { screen += "  \(line)\n" }
            }
            for stage in detail.stages {
                screen += "  stage \(stage.id): " + TerminalText.visible("\(stage.kind) \(stage.address)")
                    + " \(stage.isCompleted ? "✓ done" : "")\n"
            }
        }
        screen += "\n\(message)\nopen ID | close ID | accept ID | start ID | complete ID | stage ID SID | "
        screen += "document ID KIND NAME | refresh | quit\n> "
        output(Data(screen.utf8))
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    static func describe(_ state: ConnectionState) -> String {
        switch state {
        case .live: "● live"
        case .connecting: "connecting…"
        case .backingOff(_, let delay): "reconnecting in \(max(1, Int(delay.components.seconds))) s"
        case .pollingOnly: "polling only"
        case .stopped(let reason): "stopped (\(reason))"
        }
    }
}
