import Foundation
import Synchronization
import WaybillDomain
import WaybillNetwork
import WaybillStorage

/// The claimed `Idempotency-Key` of the request the current task is answering (set by
/// `IdempotencyGuard` around the handler), so the order write made for that request stores the
/// response in its own transaction: the change and its stored response commit together.
///
/// Why in the same transaction: with the response written afterwards, a node dying between the
/// two commits would leave a change with a claim and no response; a retry taking the claim over
/// would apply the change a second time. This way a retry finds either nothing applied (and runs
/// it) or the response (and replays it).
final class IdempotentWrite: Sendable {
    @TaskLocal static var current: IdempotentWrite?

    /// The claim was taken over by a retry while this request ran (it took longer than the
    /// guard's claim timeout): its write is rolled back and the retry's outcome stands.
    struct ClaimLost: Error {}

    let userID: UserID
    let key: String
    /// This claim's token: only it may complete or release the record.
    let token: String
    private let stored = Mutex<HTTPResponse?>(nil)
    /// How `answer` renders the order its write saves, while that write runs (nil otherwise).
    private let renderer = Mutex<(@Sendable (Order) throws -> HTTPResponse)?>(nil)

    init(userID: UserID, key: String, token: String) {
        self.userID = userID
        self.key = key
        self.token = token
    }

    /// The response stored by the order write's transaction, once that write returned.
    var storedResponse: HTTPResponse? { stored.withLock { $0 } }

    /// Stores `response` as the key's answer in `tx`. Runs on the store's thread, inside the
    /// write; a PostgreSQL retry of the transaction runs it again, and the last run is the one
    /// that commits. One order write per request: a second would find the record completed.
    /// - Throws: `ClaimLost` when the claim is no longer this request's (rolls the write back).
    func complete(with response: HTTPResponse, in tx: any StoreWriter, at now: Date) throws {
        guard try tx.completeIdempotencyKey(key, of: userID, token: token, response: StoredResponse(response), at: now)
        else { throw ClaimLost() }
        stored.withLock { $0 = response }
    }

    /// Runs an order write answered with `render(order)`. Under a claimed key the answer is
    /// rendered inside the write's transaction (`inTransaction`, read by `OrderService.run`) and stored there;
    /// the caller gets exactly the stored bytes.
    static func answer(
        _ render: @escaping @Sendable (Order) throws -> HTTPResponse, _ write: () async throws -> Order
    ) async throws -> HTTPResponse {
        guard let claim = current else { return try render(try await write()) }
        // Kept on the claim for the write's duration, not pushed as a second task-local: a
        // `withValue` nested in `IdempotencyGuard`'s crashed in `swift_task_localValuePush`
        // (SIGSEGV) in release builds on every write carrying an `Idempotency-Key` (the panel's
        // creates, the driver app's queued actions), while debug builds, which the tests run, were fine.
        claim.renderer.withLock { $0 = render }
        defer { claim.renderer.withLock { $0 = nil } }
        let order = try await write()
        return try claim.storedResponse ?? render(order)
    }

    /// What an order write adds to its transaction while `answer` runs it: the rendered answer,
    /// stored under the key (`OrderService.run` calls it after the change, before the events).
    var inTransaction: (@Sendable (Order, any StoreWriter, Date) throws -> Void)? {
        guard let render = renderer.withLock({ $0 }) else { return nil }
        return { order, tx, now in try self.complete(with: try render(order), in: tx, at: now) }
    }
}

extension StoredResponse {
    /// What is kept of a handler's response: status, its own headers (the server's common headers
    /// are added to every answer later, replays included) and body.
    init(_ response: HTTPResponse) {
        self.init(
            status: response.status, headers: response.headers.fields.map { Header(name: $0.name, value: $0.value) },
            body: response.body)
    }
}
