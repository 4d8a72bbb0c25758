import Testing
import WaybillBroker

@testable import WaybillRealtime

/// What the hub feed's loop hears about inputs dropped from its queue.
struct DroppedInputsTests {
    @Test func nothingDroppedSaysNothing() {
        let dropped = DroppedInputs()
        dropped.brokerIs(.subscribed)
        #expect(dropped.take() == nil)
    }

    /// A drop before the broker said anything (Redis down at startup) must keep the feed polling:
    /// it is reported as `.lost`, never as `.subscribed`.
    @Test func aDropBeforeTheBrokersFirstWordIsTakenAsLost() {
        let dropped = DroppedInputs()
        dropped.noteDrop()
        #expect(dropped.take() == .lost)
        #expect(dropped.take() == nil, "reported once")
    }

    @Test func aDropReportsTheLastWordTheForwarderSaw() {
        let dropped = DroppedInputs()
        dropped.brokerIs(.subscribed)
        dropped.noteDrop()
        #expect(dropped.take() == .subscribed)
        dropped.brokerIs(.lost)
        dropped.noteDrop()
        #expect(dropped.take() == .lost)
    }
}
