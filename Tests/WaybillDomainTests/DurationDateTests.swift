import Foundation
import Testing
import WaybillDomain

/// Lifetimes and windows are `Duration`s; stored times are `Date`s: the one conversion keeps
/// sub-second parts (a hand-written `components.attoseconds / 1e18` alone would drop the seconds).
struct DurationDateTests {
    @Test func aDurationIsItsSecondsAndFraction() {
        #expect(Duration.milliseconds(1500).timeInterval == 1.5)
        #expect(Duration.seconds(30 * 86_400).timeInterval == 2_592_000)
        #expect(Duration.zero.timeInterval == 0)
    }

    @Test func aDateMovesByADurationEitherWay() {
        let t0 = Date(timeIntervalSince1970: 1_000)
        #expect(t0.adding(.milliseconds(2500)) == Date(timeIntervalSince1970: 1_002.5))
        #expect(t0.adding(.zero - .seconds(10)) == Date(timeIntervalSince1970: 990))
    }
}
