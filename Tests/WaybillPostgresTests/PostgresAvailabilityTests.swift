import Foundation
import Testing

@testable import WaybillPostgres

/// The shared up/down state as a value: decisions in, decisions out, no server.
@Suite struct PostgresAvailabilityTests {
    private let start = ContinuousClock.now

    @Test func upAdmitsEveryCall() {
        var availability = PostgresAvailability()
        #expect(availability.admit(at: start) == .proceed)
        #expect(availability.admit(at: start) == .proceed)
        #expect(!availability.isDown)
    }

    @Test func downRefusesUntilTheBackoffThenLetsOneProbeThrough() {
        var availability = PostgresAvailability()
        availability.failed(at: start)
        #expect(availability.admit(at: start + .milliseconds(100)) == .refuse(retryIn: .milliseconds(100)))
        #expect(availability.admit(at: start + .milliseconds(200)) == .probe)
        #expect(availability.admit(at: start + .milliseconds(201)) == .refuse(retryIn: .zero), "one probe at a time")
        availability.succeeded()
        #expect(availability.admit(at: start + .milliseconds(202)) == .proceed)
    }

    @Test func theBackoffDoublesUpToTwoSeconds() {
        var availability = PostgresAvailability()
        var retries: [Duration] = []
        var now = start
        for _ in 0..<7 {
            availability.failed(at: now)
            guard case .refuse(let retryIn) = availability.admit(at: now) else {
                Issue.record("expected a refusal")
                return
            }
            retries.append(retryIn)
            now += retryIn
            #expect(availability.admit(at: now) == .probe)
        }
        #expect(retries == [200, 400, 800, 1600, 2000, 2000, 2000].map { .milliseconds($0) })
    }

    @Test func everyFailureStartsANewGenerationOfConnections() {
        var availability = PostgresAvailability()
        let before = availability.generation
        availability.failed(at: start)
        availability.failed(at: start)
        #expect(availability.generation == before + 2)
        availability.succeeded()
        #expect(availability.generation == before + 2, "success keeps the connections opened since")
    }

    @Test func anAbandonedProbeLetsTheNextCallProbe() {
        var availability = PostgresAvailability()
        availability.failed(at: start)
        #expect(availability.admit(at: start + .seconds(1)) == .probe)
        availability.probeAbandoned()
        #expect(availability.admit(at: start + .seconds(1)) == .probe)
    }
}
