import CWebSockets

/// One server WebSocket: its outbound queue, the message being reassembled, and close state.
///
/// Lives in the wsi's session slot from `FILTER_PROTOCOL_CONNECTION` to `CLOSED`, and in the
/// server's `sockets` map while open. Kept small because an idle server holds thousands of these:
/// no preallocated buffers, and an emptied queue keeps at most `keptQueueCapacity` slots.
/// Service thread only.
final class WebSocketConnection {
    let id: SocketID
    private(set) var wsi: OpaquePointer
    /// The upgrade request; dropped once `socketOpened` has seen it.
    var request: HTTPRequest?
    /// `socketOpened` was called, so `socketClosed` is owed exactly once.
    var wasOpened = false
    /// `socketClosed` has been reported (or nothing was owed).
    var isFinished = false

    // Outbound.
    /// Slots of an emptied queue that stay allocated (8 references: about 100 bytes per socket).
    static let keptQueueCapacity = 8
    private var queue: [OutboundFrame] = []
    private var head = 0
    private(set) var queuedBytes = 0

    // Inbound message reassembly.
    var inbound: MessageReassembler

    // Closing.
    /// The server decided to close with this code once the queue is flushed.
    private(set) var pendingClose: (code: Int, reason: String)?
    /// `lws_close_reason` was called; nothing more may be sent.
    var closeSent = false
    var closeCode: Int?
    var initiatedByServer = false
    var wasSlowConsumer = false
    /// The peer's close frame arrived (lws answers it): frames go through the queue, never written directly.
    var peerIsClosing = false
    /// Being closed by the server: lws reads nothing from the peer until the close frame goes
    /// (`ServerCore.closeFromWriteable`).
    var isReadingPaused = false
    /// In `ServerCore.deferredWrites` (listed once per drain).
    var hasDeferredWrite = false
    /// The heartbeat's ping waits for `WRITEABLE` (frames were queued ahead of it).
    var pingIsPending = false
    /// A write failed; the connection is being killed and takes no more frames.
    var isBroken = false
    /// Pongs with a payload received since the heartbeat last pinged (`ServerCore.maxPongs(perPing:)`).
    var pongsSincePing: UInt16 = 0
    /// Bytes of output the peer had acknowledged at the heartbeat's last turn for this socket
    /// (`ServerCore.pingMayNotHaveArrived`).
    var ackedAtLastTurn: UInt64 = 0
    /// Where the last ping ends in the socket's output (bytes handed to the kernel once it was
    /// written); `nil` until all of it is in the kernel.
    var pingEnd: UInt64?
    /// lws holds that ping's tail: `pingEnd` is known once lws has sent it (`ServerCore.notePingEnd`).
    var pingEndIsPending = false
    /// A backlog was still on its way ahead of that ping (`ServerCore.lateBacklogBytes`).
    var pingHadBacklog = false

    private let counter: LiveObjectCounter

    init(id: SocketID, wsi: OpaquePointer, request: HTTPRequest, counter: LiveObjectCounter, maxMessageBytes: Int) {
        self.id = id
        inbound = MessageReassembler(maxBytes: maxMessageBytes)
        self.wsi = wsi
        self.request = request
        self.counter = counter
        counter.increment()
    }

    deinit { counter.decrement() }

    /// Open and not closing: sending is allowed.
    var isOpen: Bool { wasOpened && !isFinished && pendingClose == nil && !closeSent && !isBroken }
    var hasQueued: Bool { head < queue.count }
    var queuedFrameCount: Int { queue.count - head }
    /// Slots the queue's buffer holds (what an emptied queue keeps; see `compact`).
    var queueCapacity: Int { queue.capacity }
    /// The payload size of the next frame to write, if any.
    var nextFrameCount: Int? { head < queue.count ? queue[head].count : nil }

    func enqueue(_ frame: OutboundFrame) {
        queue.append(frame)
        queuedBytes += frame.count
    }

    /// Takes the next frame out of the queue. The last one is moved out, not copied: fan-out queues
    /// one frame per event on most sockets, and a copy cost a retain here and a release when the
    /// emptied queue was cleared (docs/BENCHMARKS.md, section "2026-12-07 (13:50– UTC)").
    func dequeue() -> OutboundFrame? {
        guard head < queue.count else { return nil }
        let frame = head == queue.count - 1 ? queue.removeLast() : queue[head]
        head += 1
        queuedBytes -= frame.count
        compact()
        return frame
    }

    /// Packs frames from the front of the queue into `packer` while they fit, and takes them out;
    /// returns how many it packed. Reads them in place (no copy of each reference).
    func packFront(into packer: FramePacker) -> Int {
        var index = head, bytes = 0
        while index < queue.count {
            let count = queue[index].count
            guard packer.append(queue[index]) else { break }
            bytes += count
            index += 1
        }
        let packed = index - head
        head = index
        queuedBytes -= bytes
        compact()
        return packed
    }

    /// After frames were taken from the front: an emptied queue is cleared, and a long-drained
    /// front is cut off.
    private func compact() {
        if head >= queue.count {
            // A small buffer stays for the next frame: fan-out queues one frame per event on most
            // sockets, and allocating it again for each was a malloc/free pair per frame. A buffer a
            // burst grew is released, so an idle socket holds at most `keptQueueCapacity` slots.
            queue.removeAll(keepingCapacity: queue.capacity <= Self.keptQueueCapacity)
            head = 0
        } else if head >= 64 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }

    func dropQueue() {
        queue = []
        head = 0
        queuedBytes = 0
    }

    /// Records the server's close decision; the first one wins.
    func requestClose(code: Int, reason: String) {
        guard pendingClose == nil, !closeSent else { return }
        pendingClose = (code, reason)
        closeCode = code
        initiatedByServer = true
    }

    /// The close report for the delegate.
    var closeReport: WebSocketClose {
        WebSocketClose(code: closeCode, initiatedByServer: initiatedByServer, wasSlowConsumer: wasSlowConsumer)
    }
}
