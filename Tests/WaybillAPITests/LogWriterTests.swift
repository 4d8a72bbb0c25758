import Foundation
import Synchronization
import Testing
import WaybillObservability
import WaybillTesting

/// `LogWriter`, stderr's writer: a thread that logs never waits for the descriptor. A reader that
/// stops draining (a stuck log collector) fills the pipe; lines past the buffer are dropped and
/// counted, never waited for, and the rest arrive in order once the reader drains again.
@Suite(.timeLimit(.minutes(1)))
struct LogWriterTests {
    /// A pipe whose read end the test drains when it chooses.
    private final class Pipe: Sendable {
        let read: Int32, write: Int32
        init() {
            var ends: [Int32] = [0, 0]
            precondition(pipe(&ends) == 0)
            // Close-on-exec: a child another test starts meanwhile must not hold the write end open.
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            (read, write) = (ends[0], ends[1])
        }
        /// Everything written so far and until the write end closes (`close(write)` first).
        func drainToEnd() -> String {
            var data = [UInt8](), buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = Foundation.read(read, &buffer, buffer.count)
                if n <= 0 { break }
                data += buffer[0..<n]
            }
            return String(decoding: data, as: UTF8.self)
        }
        /// `drainToEnd` on a thread of its own.
        func drainInBackground() -> Drain {
            let drain = Drain()
            Thread { [self] in
                let all = drainToEnd()
                drain.text.withLock { $0 = all }
                drain.done.signal()
            }.start()
            return drain
        }
    }

    /// A pipe being drained (`Pipe.drainInBackground`).
    private final class Drain: Sendable {
        let text = Mutex(""), done = DispatchSemaphore(value: 0)
        /// What was read once the write end closed; nil if it did not within 20 s.
        func wait() -> String? { done.wait(timeout: .now() + 20) == .success ? text.withLock { $0 } : nil }
    }

    @Test func linesNeverWaitForAStuckReaderAndTheDroppedOnesAreCounted() throws {
        let pipe = Pipe()
        defer { close(pipe.read) }
        let writer = LogWriter(descriptor: pipe.write, capacity: 256 << 10, coalescing: .milliseconds(1)) { n in
            "dropped \(n)"
        }
        // 20 000 lines of 100 bytes: 2 MB, far past the pipe (64 KiB) and the buffer, with nobody reading.
        let logged = DispatchSemaphore(value: 0)
        Thread {
            let filler = String(repeating: "x", count: 92)
            for index in 0..<20_000 { writer.append(String(format: "%06d ", index) + filler) }
            logged.signal()
        }.start()
        #expect(logged.wait(timeout: .now() + 10) == .success, "no append waited for the stuck pipe")
        // The reader drains again: the lines kept arrive in order, then the count of the others.
        let drain = pipe.drainInBackground()
        #expect(writer.flush(timeout: .seconds(20)), "everything kept is written once the reader drains")
        writer.stop()
        close(pipe.write)
        let text = drain.wait()
        #expect(text != nil)
        let lines = (text ?? "").split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        let kept = lines.filter { !$0.hasPrefix("dropped ") }.map { Int($0.prefix(6))! }
        let reports = lines.filter { $0.hasPrefix("dropped ") }.map { Int($0.dropFirst(8))! }
        #expect(!kept.isEmpty && kept == kept.sorted(), "kept lines in order")
        #expect(kept.count + reports.reduce(0, +) == 20_000, "every line written or counted: \(kept.count) + \(reports)")
        #expect(!reports.isEmpty, "some were dropped: the buffer is smaller than what was logged")
        #expect(lines.allSatisfy { $0.count == 99 || $0.hasPrefix("dropped ") }, "no line cut or merged")
    }

    /// A descriptor another process made non-blocking answers `EAGAIN` when full: the writer
    /// waits for room instead of losing its batch.
    @Test func aNonBlockingDescriptorLosesNothing() {
        let pipe = Pipe()
        _ = fcntl(pipe.write, F_SETFL, fcntl(pipe.write, F_GETFL) | O_NONBLOCK)
        let writer = LogWriter(descriptor: pipe.write, capacity: 1 << 20, coalescing: .milliseconds(1)) { "dropped \($0)" }
        for index in 0..<2_000 { writer.append(String(format: "%06d ", index) + String(repeating: "z", count: 92)) }
        usleep(200_000)  // the writer meets the full pipe (200 KB into 64 KiB) while nobody reads
        let drain = pipe.drainInBackground()
        #expect(writer.flush(timeout: .seconds(20)))
        writer.stop()
        close(pipe.write)
        let text = drain.wait()
        #expect(text != nil)
        close(pipe.read)
        let numbers = (text ?? "").split(separator: "\n").compactMap { Int($0.prefix(6)) }
        #expect(numbers.count == 2_000 && numbers == Array(0..<2_000), "every line, once, in order: \(numbers.count) lines")
    }

    /// A flush waits for the lines queued before it, not for an empty buffer: with another thread
    /// logging all the while (and lines dropped all the while), it still returns.
    @Test func aFlushDoesNotWaitForLinesQueuedAfterIt() {
        let pipe = Pipe()
        let writer = LogWriter(descriptor: pipe.write, capacity: 16 << 10, coalescing: .milliseconds(1)) { "dropped \($0)" }
        let drained = DispatchSemaphore(value: 0)
        // A slow reader (4 KiB a millisecond): each batch takes a while to write, and the buffer is
        // full again (and dropping) whenever one is done, so it is never seen empty.
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while Foundation.read(pipe.read, &buffer, buffer.count) > 0 { usleep(1_000) }
            drained.signal()
        }.start()
        let logging = Atomic<Bool>(true), stoppedLogging = DispatchSemaphore(value: 0)
        Thread {
            while logging.load(ordering: .relaxed) { writer.append(String(repeating: "w", count: 200)) }
            stoppedLogging.signal()
        }.start()
        usleep(50_000)
        writer.append("the line before the flush")
        let start = ContinuousClock.now
        #expect(writer.flush(timeout: .seconds(10)), "the lines before it went out while others kept coming")
        #expect(start.duration(to: .now) < .seconds(3), "not held while others keep logging")
        logging.store(false, ordering: .relaxed)
        #expect(stoppedLogging.wait(timeout: .now() + 20) == .success)
        writer.stop()
        close(pipe.write)
        #expect(drained.wait(timeout: .now() + 20) == .success)
        close(pipe.read)
    }

    /// A flush returns at its deadline when the reader never drains (an exit must not hang on it).
    @Test func aFlushGivesUpAtItsDeadline() {
        let pipe = Pipe()
        let writer = LogWriter(descriptor: pipe.write, capacity: 1 << 20, coalescing: .milliseconds(1)) { "dropped \($0)" }
        for _ in 0..<2_000 { writer.append(String(repeating: "y", count: 99)) }  // 200 KB into a 64 KiB pipe
        let start = ContinuousClock.now
        #expect(!writer.flush(timeout: .milliseconds(300)), "not everything could be written")
        #expect(start.duration(to: .now) < .seconds(5))
        // Unblock the writer's thread (it waits in `write`), then let it end.
        let drain = pipe.drainInBackground()
        writer.stop()
        close(pipe.write)
        #expect(drain.wait() != nil)
        close(pipe.read)
    }
}

extension LogWriterTests {
    /// A line larger than the whole buffer is dropped, and its count goes out at once even when
    /// nothing else is logged after it.
    @Test func aLineLargerThanTheBufferIsCountedAtOnce() {
        let pipe = Pipe()
        let writer = LogWriter(descriptor: pipe.write, capacity: 1_024, coalescing: .milliseconds(1)) { "dropped \($0)" }
        let text = Mutex(""), drained = DispatchSemaphore(value: 0)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while true {
                let n = Foundation.read(pipe.read, &buffer, buffer.count)
                if n <= 0 { break }
                text.withLock { $0 += String(decoding: buffer[0..<n], as: UTF8.self) }
            }
            drained.signal()
        }.start()
        usleep(50_000)  // the writer is idle
        writer.append(String(repeating: "v", count: 5_000))
        var waited = 0
        while !text.withLock({ $0.contains("dropped 1") }), waited < 2_000 {
            usleep(10_000)
            waited += 10
        }
        #expect(text.withLock { $0 } == "dropped 1\n", "reported without another line or a flush")
        writer.stop()
        close(pipe.write)
        #expect(drained.wait(timeout: .now() + 20) == .success)
        close(pipe.read)
    }
}
