/// Text from the server made safe to print on a terminal.
///
/// Order titles, notes and addresses are whatever a dispatcher typed (the server refuses only
/// NUL). Printed as they are, an escape sequence in them would drive the driver's terminal: set
/// its title, write its clipboard (OSC 52), clear the screen and draw a fake message (found by a
/// review, 2026-12-04). Every control character (C0, DEL, C1) and every bidirectional override
/// (which can make text read in another order than it is stored) becomes U+FFFD; a tab becomes a
/// space. Line breaks are kept only where the caller allows them (notes), so a one-line field
/// cannot start a line of its own that looks like the app's.
enum TerminalText {
    static func visible(_ text: String, keepingLineBreaks: Bool = false) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09: out.append(" ")
            case 0x0A where keepingLineBreaks: out.append(scalar)
            case 0x0A, 0x0D: out.append(" ")
            case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: out.append("\u{FFFD}")
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
