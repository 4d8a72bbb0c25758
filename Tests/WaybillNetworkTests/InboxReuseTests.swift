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
            func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
                await withCheckedContinuation { done in
                    let posted = loop.post({ done.resume(returning: body()) }, bounded: false)
                    precondition(posted, "the loop has ended")
                }
            }
            _ = await onLoop { 0 }
            _ = await onLoop { 0 }
            // This drain got the buffer the one before handed back: later posts go into it.
            let kept = await onLoop { loop.inboxCapacity }
            #expect(kept > 0)

            // A burst of posts while the service thread is held up: drained at once, from a
            // buffer with room for all of them, which is then let go.
            let release = DispatchSemaphore(value: 0)
            let held = loop.post({ _ = release.wait(timeout: .now() + 20) }, bounded: false)
            #expect(held)
            let burst = ServiceLoop.keptInboxCapacity * 2
            var posted = 0
            for _ in 0..<burst where loop.post({}, bounded: false) { posted += 1 }
            #expect(posted == burst)
            #expect(loop.inboxCapacity >= burst)
            release.signal()
            _ = await onLoop { 0 }
            let afterBurst = await onLoop { loop.inboxCapacity }
            #expect(afterBurst <= ServiceLoop.keptInboxCapacity)
        }
    }
}
