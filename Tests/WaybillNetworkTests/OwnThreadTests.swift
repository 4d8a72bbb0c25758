import Foundation
import Testing

@testable import WaybillNetwork

/// Blocking work with a bound on its caller's wait (`OwnThread`): what bounds a client's name
/// lookup, which has no timeout of its own.
@Suite(.timeLimit(.minutes(1)))
struct OwnThreadTests {
    struct Bound: Error {}

    /// Work that outlasts its bound (a lookup no DNS server answers) ends its caller's wait at the
    /// bound, with the bound's error; the work's late result is dropped, not resumed twice.
    @Test func workThatOutlastsItsBoundEndsTheWaitAtTheBound() async throws {
        let started = ContinuousClock.now
        await #expect(throws: Bound.self) {
            _ = try await OwnThread.run(within: .milliseconds(200), timedOut: { Bound() }) {
                Thread.sleep(forTimeInterval: 3)
                return 1
            }
        }
        // Far under the work's 3 s, with room for a loaded machine's late timer.
        #expect(started.duration(to: .now) < .milliseconds(2500))
        try await Task.sleep(for: .seconds(3))  // the late result comes and is dropped
    }

    /// Work within its bound gives its own result or error.
    @Test func workWithinItsBoundGivesItsOwnOutcome() async throws {
        struct Own: Error {}
        #expect(try await OwnThread.run(within: .seconds(10), timedOut: { Bound() }) { 42 } == 42)
        await #expect(throws: Own.self) {
            _ = try await OwnThread.run(within: .seconds(10), timedOut: { Bound() }) { () throws -> Int in throw Own() }
        }
    }

    /// The bound in nanoseconds never traps: a negative one is 0, one past `Int`'s range the most.
    @Test func boundsOfAnySizeBecomeNanoseconds() {
        #expect(OwnThread.nanoseconds(.milliseconds(1500)) == 1_500_000_000)
        #expect(OwnThread.nanoseconds(.seconds(-1)) == 0)
        #expect(OwnThread.nanoseconds(.seconds(Int64.max)) == Int.max)
    }
}
