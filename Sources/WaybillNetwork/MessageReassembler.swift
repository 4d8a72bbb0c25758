/// Joins the pieces lws hands over (fragments, and chunks of one frame) into whole WebSocket
/// messages, refusing any message longer than `maxBytes`.
///
/// One per socket, on the thread that owns the socket; both the server (`WebSocketConnection`)
/// and the client (`ClientConnection`) use it, so the rules are written once: the first piece
/// says text or binary; a message that is whole in one piece is decoded straight from lws's
/// buffer (a `{"type":"ping"}` costs no reassembly array); `tooBig` as soon as the pieces so far
/// pass the limit, so a peer cannot make the owner buffer more than `maxBytes`.
struct MessageReassembler {
    enum Message: Equatable, Sendable {
        case text(String)
        case binary([UInt8])
    }

    enum Outcome: Equatable {
        /// More pieces follow.
        case partial
        case complete(Message)
        /// Over `maxBytes`: close the socket with 1009. What was gathered is dropped.
        case tooBig
        /// More than `maxFragments` frames without the final one: close the socket with 1008.
        case tooManyFragments

        /// The close code and reason of a refused message (server and client close alike).
        var refusal: (code: Int, reason: String)? {
            switch self {
            case .tooBig: (1009, "message too big")
            case .tooManyFragments: (1008, "too many fragments")
            case .partial, .complete: nil
            }
        }
    }

    let maxBytes: Int
    /// Frames one message may span. A message's frames cost a callback each but only a complete
    /// message is counted against a socket's frame budget, and an empty non-final frame adds no
    /// bytes: without this a peer could send fragments of one never-ending message for ever (6
    /// bytes and one callback each). Clients fragment rarely, and lws splits one frame into
    /// pieces without making more frames of it.
    let maxFragments: Int
    private var bytes: [UInt8] = []
    private var isBinary = false
    private var fragments = 0
    /// Whether a message has begun and not yet ended.
    private(set) var isInMessage = false

    init(maxBytes: Int, maxFragments: Int = 64) {
        self.maxBytes = max(0, maxBytes)
        self.maxFragments = max(1, maxFragments)
    }

    /// Takes the next piece.
    /// - Parameters:
    ///   - isBinary: the frame's kind; only the message's first piece decides it.
    ///   - endsFrame: the last piece of its frame (lws: no payload of the frame remaining).
    ///   - isLast: the last piece of the message's final fragment.
    mutating func receive(
        _ piece: UnsafeRawBufferPointer, isBinary: Bool, endsFrame: Bool = true, isLast: Bool
    ) -> Outcome {
        if !isInMessage {
            if isLast {
                guard piece.count <= maxBytes else { return .tooBig }
                return .complete(Self.message(piece, isBinary: isBinary))
            }
            isInMessage = true
            self.isBinary = isBinary
        }
        guard bytes.count + piece.count <= maxBytes else {
            reset()
            return .tooBig
        }
        if endsFrame && !isLast {
            fragments += 1
            guard fragments < maxFragments else {
                reset()
                return .tooManyFragments
            }
        }
        bytes.append(contentsOf: piece)
        guard isLast else { return .partial }
        let whole = bytes, binary = self.isBinary
        reset()
        return .complete(whole.withUnsafeBytes { Self.message($0, isBinary: binary) })
    }

    /// Forgets a message in progress (the socket is closing).
    mutating func reset() {
        bytes = []
        isBinary = false
        fragments = 0
        isInMessage = false
    }

    /// Text is not validated here: lws checks UTF-8 on both ends (`VALIDATE_UTF8`), and invalid
    /// sequences would become U+FFFD rather than crash.
    private static func message(_ piece: UnsafeRawBufferPointer, isBinary: Bool) -> Message {
        isBinary ? .binary(Array(piece)) : .text(String(decoding: piece, as: UTF8.self))
    }
}
