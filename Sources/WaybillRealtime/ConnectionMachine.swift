public import WaybillDomain

/// One socket's place in the hub protocol (SPEC §4), as a value: authenticating → replaying → live.
///
/// The hub owns one per socket, on the network service thread, feeds it what happened
/// (authenticated, a live event, the replay query's answer) and performs the actions it returns
/// (send frames, run the replay query, close). Nothing here touches a socket, a thread or the
/// store, so every rule is tested with plain values (Tests/WaybillRealtimeTests), as the client's
/// `DriverSession.StateMachine` is.
///
/// The rules it keeps:
/// - an unauthenticated socket never gets an event;
/// - while the replay query runs, live events wait in a buffer; after it, the replay and the buffer
///   go out merged in id order, each id once;
/// - nothing at or below `lastSent` is ever sent again (a broker or relay that delivers twice
///   cannot duplicate a frame);
/// - after `reset`, the socket continues from the store's newest id, not the client's cursor;
/// - a ping that arrives during the replay is answered after it (and after a `reset`): a client
///   that pings right after `connected` learns from the `pong` that no `reset` is coming.
///
/// `Frame` is the encoded event (`OutboundFrame` in the hub, anything in tests).
public struct ConnectionMachine<Frame> {
    /// Where the client asked to resume from.
    public enum Resume: Equatable, Sendable {
        /// A first connect: live from the hub's newest delivered event.
        case none
        /// `?since=<id>`: trusted as is (older clients).
        case since(EventID)
        /// `?cursor=<id>-<check>`: replayed only if the store's event under that id has that fingerprint.
        case cursor(EventCursor)
        /// A `cursor` or `since` that cannot be read: the client means to resume, but from where is
        /// unknown, so it gets `reset` (SPEC §4: never a replay, or a silence, that skips events).
        case unusable
    }

    /// The replay query the hub must run (off the service thread).
    public struct ReplayRequest: Equatable, Sendable {
        public var group: Group
        /// Events of `group` with a larger id are replayed.
        public var after: EventID
        /// For a cursor resume: the store must hold exactly this event (or it is the origin), else `reset`.
        public var expected: EventCursor?

        public init(group: Group, after: EventID, expected: EventCursor?) {
            self.group = group
            self.after = after
            self.expected = expected
        }
    }

    /// What the replay query found.
    public enum ReplayResult {
        /// The events to replay, ascending, with their frames.
        case events([(id: EventID, frame: Frame)])
        /// Cannot replay (pruned, another history, too much): the client refetches; `newest` is the store's.
        case reset(newest: EventID)
        /// The store did not answer: the client must come back later.
        case failed
    }

    /// What the hub does for this socket.
    public enum Action {
        /// The first frame, carrying the newest delivered cursor.
        case sendConnected(EventCursor)
        /// `{"type":"reset"}`.
        case sendReset
        /// Event frames, in order.
        case send([Frame])
        /// `{"type":"pong"}`, this many times: the pings that arrived during the replay.
        case sendPongs(Int)
        /// Start the replay query; its answer comes back through `replayLoaded`.
        case runReplay(ReplayRequest)
        /// Record the `seen` reports that arrived during the replay, now that it sent this
        /// history's events (after a `reset` they are dropped instead: ``seen(_:)``).
        case recordSeen([SeenReport])
        case close(code: Int, reason: String)
    }

    /// What to do with one live event.
    public enum LiveAction {
        case send(Frame)
        /// Kept until the replay is answered.
        case buffered
        /// Already sent, not yet (or no longer) allowed to send.
        case skip
        /// The replay buffer is full: close the socket (it resumes later, missing nothing).
        case close(code: Int, reason: String)
    }

    /// How to answer a client's ping.
    public enum PingAnswer: Equatable, Sendable {
        /// `{"type":"pong"}` now.
        case pong
        /// After the replay (``Action/sendPongs(_:)`` from ``replayLoaded(_:)``).
        case afterReplay
        /// Not at all: not authenticated yet, or closing.
        case ignore
    }

    /// Why authentication did not admit the socket.
    public enum Refusal: Sendable {
        /// No, a bad, an expired or a used ticket/token: 4001, the client must log in again.
        case notAuthenticated
        /// The user has no company: 4003.
        case noCompany
        /// The store did not answer: 1011, try again.
        case unavailable
        /// Too many sockets are authenticating at once: 1013, try again later.
        case busy
        /// Authentication did not finish in time: 1013, try again later.
        case timedOut
        /// The user's request rate is spent (`SocketAuthenticating.admitsSocket`): 1013, try again later.
        case overRate
    }

    public enum Phase: Equatable, Sendable {
        case authenticating
        case replaying
        case live
        /// A close was asked for: nothing more is sent.
        case closing
    }

    public private(set) var phase: Phase = .authenticating
    public private(set) var group: Group?
    public private(set) var userID: UserID?
    /// Highest event id queued on this socket: nothing at or below it is sent again.
    public private(set) var lastSent: EventID = .zero
    /// Live events that arrived while replaying, and their frames' bytes.
    private var buffer: [(id: EventID, frame: Frame)] = []
    private var bufferedBytes = 0
    /// Pings that arrived while replaying, answered after it (at most ``maxOwedPongs``).
    private var owedPongs = 0
    /// `seen` reports that arrived while replaying (at most ``maxHeldSeen``, the newest kept).
    private var heldSeen: [SeenReport] = []
    /// The most receipts one driver's coalescer holds (`ReceiptCoalescer`): more are not needed.
    static var maxHeldSeen: Int { 1_200 }
    /// A client needs one pong after the replay to know its outcome; more pings than this during one
    /// replay (the frame budget already limits them) are answered this many times.
    static var maxOwedPongs: Int { 8 }
    /// The most live events kept while replaying. Frames are shared with every other socket, so
    /// an entry costs an id and a reference; the bound is on their number.
    public let maxBufferedEvents: Int
    /// The most bytes of live frames kept while replaying.
    public let maxBufferedBytes: Int

    /// - Parameters:
    ///   - maxBufferedEvents: past this many live events during a replay, the socket is closed with
    ///     4008 (a replay that slow is better restarted than buffered without limit).
    ///   - maxBufferedBytes: the same past this many bytes of them. The replay and the buffer go out
    ///     in one piece: with the replay's own cap, this keeps them within the socket's outbound
    ///     limit, which otherwise dropped both and closed a healthy client as a slow consumer with
    ///     nothing sent (found by a review, 2026-12-05).
    public init(maxBufferedEvents: Int = 10_000, maxBufferedBytes: Int = .max) {
        self.maxBufferedEvents = max(1, maxBufferedEvents)
        self.maxBufferedBytes = max(1, maxBufferedBytes)
    }

    /// The socket authenticated as `user` and joins `group`; `newest` is the hub's newest delivered cursor.
    public mutating func authenticated(user: UserID, group: Group, resume: Resume, newest: EventCursor) -> [Action] {
        guard phase == .authenticating else { return [] }
        self.userID = user
        self.group = group
        let after: EventID, expected: EventCursor?
        switch resume {
        case .none:
            lastSent = newest.id
            phase = .live
            return [.sendConnected(newest)]
        case .unusable:
            lastSent = newest.id
            phase = .live
            return [.sendConnected(newest), .sendReset]
        case .since(let id): (after, expected) = (id, nil)
        case .cursor(let cursor): (after, expected) = (cursor.id, cursor)
        }
        // From here on, live events for the group are buffered: anything the replay query's snapshot
        // misses reaches the hub after this point (docs/DESIGN.md, "Resume").
        lastSent = after
        phase = .replaying
        return [.sendConnected(newest), .runReplay(ReplayRequest(group: group, after: after, expected: expected))]
    }

    /// Authentication refused the socket (or could not tell).
    public mutating func refused(_ refusal: Refusal) -> Action {
        phase = .closing
        switch refusal {
        case .notAuthenticated: return .close(code: 4001, reason: "not authenticated")
        case .noCompany: return .close(code: 4003, reason: "no company")
        case .unavailable: return .close(code: 1011, reason: "try again")
        case .busy: return .close(code: 1013, reason: "server busy; try again later")
        case .timedOut: return .close(code: 1013, reason: "authentication timed out; try again later")
        case .overRate: return .close(code: 1013, reason: "too many requests for this user")
        }
    }

    /// A live event of this socket's group; `bytes`, its frame's size (for the replay buffer's bound).
    public mutating func live(_ id: EventID, _ frame: Frame, bytes: Int = 0) -> LiveAction {
        switch phase {
        case .live:
            guard id > lastSent else { return .skip }
            lastSent = id
            return .send(frame)
        case .replaying:
            guard buffer.count < maxBufferedEvents, bufferedBytes + bytes <= maxBufferedBytes else {
                closing()
                return .close(code: 4008, reason: "too many events during replay; resume again")
            }
            buffer.append((id, frame))
            bufferedBytes += bytes
            return .buffered
        case .authenticating, .closing:
            return .skip
        }
    }

    /// The replay query answered: send the replay (or `reset`), then the buffer, then go live.
    public mutating func replayLoaded(_ result: ReplayResult) -> [Action] {
        guard phase == .replaying else { return [] }
        let buffered = buffer, held = heldSeen
        buffer = []
        bufferedBytes = 0
        heldSeen = []
        var actions: [Action] = []
        var replayed: [(id: EventID, frame: Frame)] = []
        // Recorded after this history's events; dropped with a `reset` (they may name content of the
        // history a restore took back: PROTOCOL "Receipts") or a failure.
        var seenAfter: [SeenReport] = []
        switch result {
        case .failed:
            phase = .closing
            owedPongs = 0
            return [.close(code: 1011, reason: "replay failed; reconnect")]
        case .reset(let newest):
            actions.append(.sendReset)
            // Not max(): a cursor from another history may be above every id this store will reach
            // soon; after a reset the client refetches everything up to `newest`.
            lastSent = newest
        case .events(let events):
            replayed = events
            seenAfter = held
        }
        var frames: [Frame] = []
        for (id, frame) in replayed + buffered where id > lastSent {
            lastSent = id
            frames.append(frame)
        }
        if !frames.isEmpty { actions.append(.send(frames)) }
        // Last: a pong says everything the resume owed is out, `reset` included (docs/PROTOCOL.md).
        if owedPongs > 0 { actions.append(.sendPongs(owedPongs)) }
        owedPongs = 0
        if !seenAfter.isEmpty { actions.append(.recordSeen(seenAfter)) }
        phase = .live
        return actions
    }

    /// The hub is closing this socket (logout, rewind, shutdown): nothing more goes out.
    public mutating func closing() {
        phase = .closing
        buffer = []
        bufferedBytes = 0
        owedPongs = 0
        heldSeen = []
    }

    /// Whether client frames (pings, receipts) are taken: only once authenticated, and not while closing.
    public var answersPings: Bool { group != nil && phase != .closing }

    /// The client sent `{"type":"ping"}`. During the replay the answer waits for it, so that the pong
    /// comes after the replay's frames or its `reset`: before this, a pong could overtake a `reset`,
    /// and a client resuming with queued actions had no way to know a `reset` was still coming.
    public mutating func ping() -> PingAnswer {
        guard answersPings else { return .ignore }
        guard phase == .replaying else { return .pong }
        owedPongs = min(owedPongs + 1, Self.maxOwedPongs)
        return .afterReplay
    }

    /// The client sent `seen`: whether to record it now. While the resume's outcome is unknown
    /// (the replay still read) a version may name content of a history a restore took back, which
    /// the `reset` still to come would say: the reports wait for the replay, and are recorded
    /// after its events (``Action/recordSeen(_:)``) or dropped with its `reset`. Recorded at once,
    /// a restored history could show "seen" for content the driver never saw; dropped at once (as
    /// first tried), a client whose own wait for the outcome ran out just before the server's
    /// replay answered lost them for the socket's life (both found by reviews, 2026-12-07).
    public mutating func seen(_ reports: [SeenReport]) -> SeenAnswer {
        guard answersPings else { return .ignore }
        guard phase == .replaying else { return .record }
        heldSeen += reports
        if heldSeen.count > Self.maxHeldSeen { heldSeen.removeFirst(heldSeen.count - Self.maxHeldSeen) }
        return .afterReplay
    }

    /// What to do with a client's `seen` now.
    public enum SeenAnswer: Equatable, Sendable {
        case record
        /// Held until the replay's outcome (``Action/recordSeen(_:)`` after its events).
        case afterReplay
        /// Not authenticated yet, or closing.
        case ignore
    }
}

extension ConnectionMachine.Action: Equatable where Frame: Equatable {}
extension ConnectionMachine.LiveAction: Equatable where Frame: Equatable {}
extension ConnectionMachine.ReplayResult: Sendable where Frame: Sendable {}
extension ConnectionMachine.Action: Sendable where Frame: Sendable {}
