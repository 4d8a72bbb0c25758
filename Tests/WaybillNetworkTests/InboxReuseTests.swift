import Foundation
import Testing
@testable import WaybillNetwork
import WaybillTesting

/// The service loop's inbox keeps its buffer from one drain to the next (`ServiceLoop.spareInbox`),
/// so posting work allocates nothing; a burst's large buffer is not kept.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct InboxReuseTests {
    @Test func aDrainedBufferTakesTheNextPostsAndABurstsIsNotKept() async throws {
        try await withServer { server in
            let loop = server.core.loop
            // Runs `body` on the service thread, in a drain of its own, and returns its result.
            func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async throws -> T {
                let result: T? = await withCheckedContinuation { done in
                    if !loop.post({ done.resume(returning: body()) }, bounded: false) { done.resume(returning: nil) }
                }
                return try #require(result, "the loop has ended")
            }
            _ = try await onLoop { 0 }
            _ = try await onLoop { 0 }
            // This drain got the buffer the one before handed back: later posts go into it.
            let kept = try await onLoop { loop.inboxCapacity }
            #expect(kept > 0)

            // A burst of posts while the service thread is held up: drained at once, from a
            // buffer with room for all of them, which is then let go.
            let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let held = loop.post({
                started.signal()
                _ = release.wait(timeout: .now() + 20)
            }, bounded: false)
            #expect(held)
            // Every post of the burst lands while that item runs: none is taken by an earlier drain.
            #expect(started.wait(timeout: .now() + 20) == .success)
            let burst = ServiceLoop.keptInboxCapacity * 2
            var posted = 0
            for _ in 0..<burst where loop.post({}, bounded: false) { posted += 1 }
            #expect(posted == burst)
            #expect(loop.inboxCapacity >= burst)
            release.signal()
            _ = try await onLoop { 0 }
            let afterBurst = try await onLoop { loop.inboxCapacity }
            #expect(afterBurst <= ServiceLoop.keptInboxCapacity)
        }
    }
}
