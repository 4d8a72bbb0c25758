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
        // The bound's error, not the work's result, proves the bound ended the wait: the work
        // answers only after 5 s. (Not the caller's time: a task on a loaded machine resumes late
        // whoever resumes it; a stress run saw 3.6 s.)
        await #expect(throws: Bound.self) {
            _ = try await OwnThread.run(within: .milliseconds(200), timedOut: { Bound() }) {
                Thread.sleep(forTimeInterval: 5)
                return 1
            }
        }
        try await Task.sleep(for: .seconds(5))  // the late result comes and is dropped
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
