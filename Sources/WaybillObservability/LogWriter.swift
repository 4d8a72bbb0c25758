import Foundation
import Synchronization

/// Writes log lines to a file descriptor (stderr) from a thread of its own, so that a thread
/// that logs, the service thread writing every access line above all, never waits on it.
///
/// Why: `write(2)` to a pipe blocks once its reader stops draining it (a stuck log collector, a
/// terminal paused with Ctrl-S); with one synchronous write per line, that stopped the node. Lines
/// wait in a buffer of `capacity` bytes; past it a line is dropped and counted, and the count goes
/// out as a line of its own after the lines kept before it. The thread writes what has built up,
/// then pauses `coalescing` before it looks again: under load one `write` per pause instead of
/// one per line; an idle writer is woken by the next line at once.
///
/// Lines still buffered when the process exits through `exit` are flushed by an `atexit` handler
/// for up to 2 s (`standardError` only); a crash loses what is still buffered (about one pause's
/// worth, up to `capacity` when the reader lags).
public final class LogWriter: @unchecked Sendable {  // safe: the state below only under `condition`
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    /// Lines dropped since the last count went out, and ever.
    private var dropped = 0, droppedEver = 0
    /// Dropped lines whose count has been written (or given up on).
    private var droppedReported = 0
    /// Bytes ever queued, and ever taken by the thread and written (or given up on).
    private var appended = 0, finished = 0
    /// The thread sleeps on an empty buffer: the next line wakes it.
    private var idle = false
    private var stopped = false
    /// The thread's own copy of the descriptor, closed when it exits (`stop`): the caller's may
    /// be closed and its number reused meanwhile. The caller's itself if it could not be copied.
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    private let capacity: Int
    private let coalescing: Duration
    private let droppedLine: @Sendable (Int) -> String
    private let exited = DispatchSemaphore(value: 0)

    /// Whether `standardError` has been made (so that flushing it never starts it).
    private static let standardErrorStarted = Atomic<Bool>(false)

    /// The process's stderr writer, started on first use.
    public static let standardError: LogWriter = {
        let writer = LogWriter(descriptor: 2) { count in
            Logger.line(.warning, "log lines dropped: the log's reader was too slow", ["count": "\(count)"])
        }
        standardErrorStarted.store(true, ordering: .releasing)
        atexit { LogWriter.flushStandardError(timeout: .seconds(2)) }
        return writer
    }()

    /// Flushes `standardError` if it was ever used: before a message written to stderr directly
    /// (a command's last words), so that the lines logged before it come first.
    public static func flushStandardError(timeout: Duration) {
        guard standardErrorStarted.load(ordering: .acquiring) else { return }
        standardError.flush(timeout: timeout)
    }

    /// - Parameters:
    ///   - descriptor: duplicated; the writer uses and closes its own copy.
    ///   - capacity: bytes that may wait; a line past them is dropped (and counted).
    ///   - coalescing: the pause after each `write`. 50 ms: each pause is a timed sleep and a
    ///     wake-up, which on this VM cost the thread about 40 µs of CPU (the kernel's timer and
    ///     switch path); with 10 ms, at 1 000 requests/s that was about 4 µs of every request
    ///     (measured, docs/BENCHMARKS.md, 2026-12-06 22:34–). A log line is never urgent; a crash loses
    ///     up to one pause's worth of lines (about 50 ms), and `flush` may wait out one pause.
    ///   - droppedLine: the line that reports `n` dropped lines (without its newline).
    public init(
        descriptor: Int32, capacity: Int = 1 << 20, coalescing: Duration = .milliseconds(50),
        droppedLine: @escaping @Sendable (Int) -> String
    ) {
        let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 3)
        self.descriptor = copy >= 0 ? copy : descriptor
        ownsDescriptor = copy >= 0
        self.capacity = capacity
        self.coalescing = coalescing
        self.droppedLine = droppedLine
        let thread = Thread { [self] in
            run()
            if ownsDescriptor { close(self.descriptor) }
            exited.signal()
        }
        thread.name = "waybill.log"
        thread.start()
    }

    /// Queues `line` and a newline; never waits for the descriptor.
    public func append(_ line: String) {
        var line = line
        line.withUTF8 { bytes in append(bytes: bytes) }
    }

    /// `append` of a line's UTF-8 bytes (without its newline).
    func append(bytes: UnsafeBufferPointer<UInt8>) {
        condition.lock()
        defer { condition.unlock() }
        guard !stopped else { return }
        guard pending.count + bytes.count + 1 <= capacity else {
            dropped += 1
            droppedEver += 1
            if idle { condition.broadcast() }  // a line larger than the buffer: its count goes out now
            return
        }
        pending.append(contentsOf: bytes)
        pending.append(UInt8(ascii: "\n"))
        appended += bytes.count + 1
        if idle { condition.broadcast() }
    }

    /// Waits until every line queued before the call is written (and every line dropped before it
    /// is counted in a written line), at most `timeout`; whether it was. Lines queued meanwhile
    /// by other threads are not waited for.
    @discardableResult
    public func flush(timeout: Duration) -> Bool {
        // On the monotonic clock: a wall clock stepped back must not stretch an exit's flush.
        let deadline = ContinuousClock.now + timeout
        condition.lock()
        defer { condition.unlock() }
        let (bytes, drops) = (appended, droppedEver)
        while finished < bytes || droppedReported < drops {
            guard !stopped else { return false }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            condition.broadcast()  // an idle thread takes it now
            _ = condition.wait(until: Date(timeIntervalSinceNow: min(Self.seconds(left), 0.1)))
        }
        return true
    }

    /// Writes what is queued (for up to 2 s), then ends the thread and closes its descriptor;
    /// what could not be written is dropped, and so is every later line. For writers other than
    /// `standardError`, which lives as long as the process. Returns whether the thread ended
    /// (within 2 s more: it may be stuck in a `write` that never returns).
    @discardableResult
    public func stop() -> Bool {
        flush(timeout: .seconds(2))
        condition.lock()
        stopped = true
        pending.removeAll()
        condition.broadcast()
        condition.unlock()
        return exited.wait(timeout: .now() + 2) == .success
    }

    private func run() {
        var batch: [UInt8] = []
        batch.reserveCapacity(min(capacity, 64 << 10))
        while true {
            condition.lock()
            while pending.isEmpty && dropped == 0 && !stopped {
                idle = true
                condition.wait()
                idle = false
            }
            if stopped {
                condition.unlock()
                return
            }
            swap(&batch, &pending)
            let lost = dropped
            dropped = 0
            condition.unlock()

            let lines = batch.count
            if lost > 0 { batch.append(contentsOf: Array((droppedLine(lost) + "\n").utf8)) }
            writeAll(batch)
            batch.removeAll(keepingCapacity: true)

            condition.lock()
            finished += lines
            droppedReported += lost
            condition.broadcast()  // flushers
            condition.unlock()
            Thread.sleep(forTimeInterval: Self.seconds(coalescing))
        }
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    /// Writes every byte, retrying partial writes and interruptions, and waiting for room on a
    /// descriptor another process made non-blocking (`EAGAIN`). A descriptor that fails otherwise
    /// (closed, a pipe without a reader) loses the rest of the batch: there is nowhere to say so.
    /// Stops waiting for room once the writer is stopped.
    private func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    var waiting = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&waiting, 1, 1_000)
                    if isStopped { return }
                } else {
                    return
                }
            }
        }
    }

    private var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }
}
