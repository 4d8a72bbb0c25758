import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillSQLite
import WaybillStorage

@testable import WaybillRealtime

/// A resume's replay is read a page at a time and encoded as read, so one far behind finds its
/// `reset` at the byte limit after about that many bytes of events, not after `limit + 1` of them
/// (one user reconnecting in a loop kept the reader threads busy with 10 001-event reads).
@Suite(.timeLimit(.minutes(1)))
struct ReplayQueryTests {
    @Test func aResumeFarBehindStopsReadingAtTheByteLimit() async throws {
        try await withStore { store in
            try await store.append(3_000)
            let request = Hub.Connection.ReplayRequest(group: .company(1), after: .zero, expected: nil)
            let frameBytes = OutboundFrame(text: EventFrame.json(try #require(try await store.read { tx in try tx.event(EventID(1)) }))).count
            let (result, read) = try await store.read { tx in
                let counting = CountingReader(tx)
                let result = try Hub.replayQuery(request, limit: 10_000, byteLimit: 100 * frameBytes, in: counting)
                return (result, counting.eventsRead)
            }
            guard case .reset(let newest) = result else {
                Issue.record("expected a reset, got \(result)")
                return
            }
            #expect(newest == EventID(3_000), "the snapshot's newest event")
            #expect(read < 1_000, "\(read) events read for a reset after 101 frames (3 000 were there)")

            // Within both limits: every event, in order; at the count limit exactly: still a replay.
            let (all, atLimit, pastLimit) = try await store.read { tx in
                (
                    try Hub.replayQuery(request, limit: 10_000, byteLimit: 10_000 * frameBytes, in: tx),
                    try Hub.replayQuery(request, limit: 3_000, byteLimit: 10_000 * frameBytes, in: tx),
                    try Hub.replayQuery(request, limit: 2_999, byteLimit: 10_000 * frameBytes, in: tx)
                )
            }
            guard case .events(let frames) = all, case .events(let exact) = atLimit else {
                Issue.record("expected the events: \(all), \(atLimit)")
                return
            }
            #expect(frames.map(\.id.rawValue) == Array(1...3_000))
            #expect(exact.count == 3_000)
            guard case .reset = pastLimit else {
                Issue.record("one event past the count limit is a reset: \(pastLimit)")
                return
            }
        }
    }
}

/// A reader that counts the events `events(of:after:limit:)` hands out.
final class CountingReader: StoreReader, @unchecked Sendable {  // used on one thread, inside one read
    private let inner: any StoreReader
    private(set) var eventsRead = 0
    init(_ inner: any StoreReader) { self.inner = inner }

    func events(of group: Group, after: EventID, limit: Int) throws -> [StoredEvent] {
        let events = try inner.events(of: group, after: after, limit: limit)
        eventsRead += events.count
        return events
    }
    func company(_ id: CompanyID) throws -> Company? { try inner.company(id) }
    func user(_ id: UserID) throws -> User? { try inner.user(id) }
    func credentials(email: String) throws -> (user: User, passwordHash: String)? { try inner.credentials(email: email) }
    func user(tokenHash: [UInt8], now: Date) throws -> (user: User, epoch: SessionEpoch, lastUsedAt: Date)? {
        try inner.user(tokenHash: tokenHash, now: now)
    }
    func drivers(in company: CompanyID) throws -> [User] { try inner.drivers(in: company) }
    func orderPage(in company: CompanyID, _ query: OrderQuery) throws -> OrderPage { try inner.orderPage(in: company, query) }
    func orderCounts(in company: CompanyID, driver: UserID?) throws -> [OrderStatus: Int] {
        try inner.orderCounts(in: company, driver: driver)
    }
    func order(_ id: OrderID, in company: CompanyID) throws -> Order? { try inner.order(id, in: company) }
    func events(after: EventID, limit: Int) throws -> [StoredEvent] { try inner.events(after: after, limit: limit) }
    func newestEventID() throws -> EventID { try inner.newestEventID() }
    func prunedThrough() throws -> EventID { try inner.prunedThrough() }
    func relayedThrough() throws -> EventID { try inner.relayedThrough() }
    func oldestUnrelayedEventTime() throws -> Date? { try inner.oldestUnrelayedEventTime() }
    func event(_ id: EventID) throws -> StoredEvent? { try inner.event(id) }
    func logoutPoll(since: Date, afterID: Int64?) throws -> LogoutPoll { try inner.logoutPoll(since: since, afterID: afterID) }
    func sessionEpochs(of users: [UserID]) throws -> [UserID: SessionEpoch] { try inner.sessionEpochs(of: users) }
}
