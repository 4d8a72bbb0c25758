import Testing

@testable import WaybillNetwork

/// The one reassembly rule set the server and the client share.
struct MessageReassemblerTests {
    /// Feeds `pieces` (the last one ends the message) and returns every outcome.
    func feed(_ reassembler: inout MessageReassembler, _ pieces: [String], isBinary: Bool = false) -> [MessageReassembler.Outcome] {
        pieces.enumerated().map { index, piece in
            Array(piece.utf8).withUnsafeBytes { reassembler.receive($0, isBinary: isBinary, isLast: index == pieces.count - 1) }
        }
    }

    @Test func aMessageInMoreFramesThanTheLimitIsRefused() {
        var r = MessageReassembler(maxBytes: 64, maxFragments: 3)
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        // Pieces of one frame are not frames: only a frame's last piece counts.
        #expect(r.receive(empty, isBinary: false, endsFrame: false, isLast: false) == .partial)
        #expect(r.receive(empty, isBinary: false, endsFrame: true, isLast: false) == .partial)
        #expect(r.receive(empty, isBinary: false, endsFrame: true, isLast: false) == .partial)
        #expect(r.receive(empty, isBinary: false, endsFrame: true, isLast: false) == .tooManyFragments)
        #expect(!r.isInMessage)
        // Two non-final frames and the final one are within a limit of three.
        #expect(feed(&r, ["a", "b", "c"]) == [.partial, .partial, .complete(.text("abc"))])
    }

    @Test func aWholeMessageInOnePieceIsCompleteAtOnce() {
        var r = MessageReassembler(maxBytes: 64)
        #expect(feed(&r, [#"{"type":"ping"}"#]) == [.complete(.text(#"{"type":"ping"}"#))])
        #expect(!r.isInMessage)
    }

    @Test func fragmentsAreJoinedInOrder() {
        var r = MessageReassembler(maxBytes: 64)
        #expect(feed(&r, ["hé", "ll", "o"]) == [.partial, .partial, .complete(.text("héllo"))])
        #expect(!r.isInMessage)
        // The next message starts clean.
        #expect(feed(&r, ["x"]) == [.complete(.text("x"))])
    }

    @Test func aMultiByteCharacterSplitAcrossPiecesSurvives() {
        var r = MessageReassembler(maxBytes: 64)
        let bytes = Array("é".utf8)
        let first = [bytes[0]].withUnsafeBytes { r.receive($0, isBinary: false, isLast: false) }
        let second = [bytes[1]].withUnsafeBytes { r.receive($0, isBinary: false, isLast: true) }
        #expect([first, second] == [.partial, .complete(.text("é"))])
    }

    @Test func theFirstPieceDecidesBinary() {
        var r = MessageReassembler(maxBytes: 64)
        let first = [UInt8]([1, 2]).withUnsafeBytes { r.receive($0, isBinary: true, isLast: false) }
        // Continuation frames carry no kind of their own.
        let last = [UInt8]([3]).withUnsafeBytes { r.receive($0, isBinary: false, isLast: true) }
        #expect([first, last] == [.partial, .complete(.binary([1, 2, 3]))])
    }

    @Test func exactlyTheLimitFitsOneMoreByteIsTooBig() {
        var r = MessageReassembler(maxBytes: 4)
        #expect(feed(&r, ["abcd"]) == [.complete(.text("abcd"))])
        #expect(feed(&r, ["abcde"]) == [.tooBig])
        #expect(feed(&r, ["ab", "cd"]) == [.partial, .complete(.text("abcd"))])
    }

    /// The limit holds while pieces arrive: the reassembler never holds more than `maxBytes`.
    @Test func fragmentsOverTheLimitAreRefusedAsSoonAsTheyPassIt() {
        var r = MessageReassembler(maxBytes: 4)
        #expect(feed(&r, ["abc", "de", "f"]) == [.partial, .tooBig, .complete(.text("f"))])
    }

    @Test func anEmptyMessageIsComplete() {
        var r = MessageReassembler(maxBytes: 4)
        #expect([UInt8]().withUnsafeBytes { r.receive($0, isBinary: false, isLast: true) } == .complete(.text("")))
    }

    @Test func resetForgetsAMessageInProgress() {
        var r = MessageReassembler(maxBytes: 8)
        _ = Array("abc".utf8).withUnsafeBytes { r.receive($0, isBinary: false, isLast: false) }
        r.reset()
        #expect(!r.isInMessage)
        #expect(feed(&r, ["z"]) == [.complete(.text("z"))])
    }
}
