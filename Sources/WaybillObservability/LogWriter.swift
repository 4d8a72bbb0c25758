import Foundation

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
/// for up to 2 s (`standardError` only); a crash loses what the last pause held.
public final class LogWriter: @unchecked Sendable {  // safe: state below only under `condition`
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var dropped = 0
    /// The thread is writing a batch it took (outside the lock): a flush waits for it too.
    private var writing = false
    /// The thread sleeps on an empty buffer: the next line wakes it.
    private var idle = false
    private var stopped = false
    private let descriptor: Int32
    private let capacity: Int
    private let coalescing: Duration
    private let droppedLine: @Sendable (Int) -> String

    /// The process's stderr writer, started on first use.
    public static let standardError: LogWriter = {
        let writer = LogWriter(descriptor: 2) { count in
            Logger.line(.warning, "log lines dropped: the log's reader was too slow", ["count": "\(count)"])
        }
        atexit { _ = LogWriter.standardError.flush(timeout: .seconds(2)) }
        return writer
    }()

    /// - Parameters:
    ///   - capacity: bytes that may wait; a line past them is dropped (and counted).
    ///   - droppedLine: the line that reports `n` dropped lines (without its newline).
    public init(
        descriptor: Int32, capacity: Int = 1 << 20, coalescing: Duration = .milliseconds(10),
        droppedLine: @escaping @Sendable (Int) -> String
    ) {
        self.descriptor = descriptor
        self.capacity = capacity
        self.coalescing = coalescing
        self.droppedLine = droppedLine
        let thread = Thread { [self] in run() }
        thread.name = "waybill.log"
        thread.start()
    }

    /// Queues `line` and a newline; never waits for the descriptor.
    public func append(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            condition.lock()
            defer { condition.unlock() }
            guard pending.count + bytes.count + 1 <= capacity, !stopped else {
                dropped += 1
                return
            }
            pending.append(contentsOf: bytes)
            pending.append(UInt8(ascii: "\n"))
            if idle { condition.broadcast() }
        }
    }

    /// Waits until every line queued so far is written (or reported dropped), at most `timeout`;
    /// whether it was.
    @discardableResult
    public func flush(timeout: Duration) -> Bool {
        let deadline = Date(timeIntervalSinceNow: Self.seconds(timeout))
        condition.lock()
        defer { condition.unlock() }
        while !pending.isEmpty || dropped > 0 || writing {
            condition.broadcast()  // an idle thread takes it now
            if !condition.wait(until: deadline) { return pending.isEmpty && dropped == 0 && !writing }
        }
        return true
    }

    /// Writes what is queued (for up to 2 s) and ends the thread; later lines are dropped. For
    /// writers other than `standardError`, which lives as long as the process.
    public func stop() {
        flush(timeout: .seconds(2))
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
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
            if stopped && pending.isEmpty && dropped == 0 {
                condition.unlock()
                return
            }
            swap(&batch, &pending)
            let lost = dropped
            dropped = 0
            writing = true
            condition.unlock()

            if lost > 0 { batch.append(contentsOf: Array((droppedLine(lost) + "\n").utf8)) }
            writeAll(batch)
            batch.removeAll(keepingCapacity: true)

            condition.lock()
            writing = false
            condition.broadcast()  // flushers
            condition.unlock()
            Thread.sleep(forTimeInterval: Self.seconds(coalescing))
        }
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    /// Writes every byte, retrying partial writes and interruptions; a descriptor that fails
    /// otherwise (closed, a pipe without a reader) loses the batch: there is nowhere to report it.
    private func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
