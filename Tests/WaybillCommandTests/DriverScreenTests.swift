import Foundation
import Synchronization
import Testing
import WaybillClient

@testable import waybill

/// The driver's screen prints order text a dispatcher typed: it must not reach the terminal as
/// control sequences (found by a review, 2026-12-04: OSC 52 wrote the clipboard, `ESC[2J` cleared
/// the screen for a fake message).
struct DriverScreenTests {
    static let hostile = "Pallets\u{1B}]0;HACKED\u{07}\u{1B}[2J\u{1B}[31mFAKE: go home\u{9B}2J\u{202E}gnp.exe"

    @Test func orderTextCannotDriveTheTerminal() throws {
        let screens = Mutex<[Data]>([])
        let view = ScreenView(email: "driver1@example.com") { data in screens.withLock { $0.append(data) } }
        view.show(.orders([OrderSummary(id: 7, number: Self.hostile, status: .assigned, title: Self.hostile)]))
        view.show(.detail(OrderDetail(
            id: 7, number: "2026/12/0007", status: .assigned, title: Self.hostile,
            notes: "line one\n\u{1B}]52;c;ZWNobyBwd25lZA==\u{07}line two",
            stages: [.init(id: 1, position: 0, kind: Self.hostile, address: "Depot\r\u{1B}[1A")])))
        let last = try #require(screens.withLock { $0.last })
        let text = String(decoding: last, as: UTF8.self)
        let prefix = "\u{1B}[2J\u{1B}[H"
        #expect(text.hasPrefix(prefix))
        let rest = text.dropFirst(prefix.count)
        let controls = rest.unicodeScalars.filter {
            ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value)
        }
        #expect(controls.isEmpty, "\(controls.map { String($0.value, radix: 16) })")
        #expect(rest.contains("Pallets"), "the text itself is still shown")
        // A line break in the notes stays a line break, indented under the order: it cannot start a
        // line at the margin that looks like the app's own.
        #expect(rest.contains("\n  line one\n  \u{FFFD}]52;c;ZWNobyBwd25lZA==\u{FFFD}line two\n"), "\(rest)")
    }

    /// A failure before the session (login refused, queue locked) is one plain line on stderr: the
    /// screen is not drawn (an empty order list and a prompt nobody reads were left on the terminal).
    @Test func aFailureBeforeTheSessionIsOnePlainLineNotAScreen() throws {
        let screens = Mutex<[Data]>([]), lines = Mutex<[String]>([])
        let view = ScreenView(
            email: "driver1@example.com", output: { data in screens.withLock { $0.append(data) } },
            errorOutput: { line in lines.withLock { $0.append(line) } })
        view.startFailed("login failed: not authenticated\u{1B}[2J")
        #expect(screens.withLock { $0.isEmpty })
        #expect(lines.withLock { $0 } == ["waybill driver: login failed: not authenticated\u{FFFD}[2J"])
    }

    @Test func oneLineFieldsStayOnOneLine() {
        #expect(TerminalText.visible("a\nb\r\nc\td") == "a b  c d")
        #expect(TerminalText.visible("a\nb", keepingLineBreaks: true) == "a\nb")
        #expect(TerminalText.visible("Zürich — 東京 ✓") == "Zürich — 東京 ✓")
    }
}
