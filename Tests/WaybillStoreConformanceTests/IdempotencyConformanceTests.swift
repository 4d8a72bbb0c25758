import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

/// `Idempotency-Key` records (SPEC §2): claim, replay, reuse, in use, stale takeover, release, prune.
@Suite struct IdempotencyConformanceTests {
    static let user = UserID(7)

    static func request(
        key: String = "retry-1", user: UserID = user, path: String = "/api/orders", body: String = "{}"
    ) -> IdempotentRequest {
        IdempotentRequest(
            userID: user, key: key, method: "POST", path: path, fingerprint: Array("POST \(path) \(body)".utf8))
    }

    static let created = StoredResponse(
        status: 201,
        headers: [
            .init(name: "etag", value: "\"o1-v1\""), .init(name: "content-type", value: "application/json"),
            .init(name: "link", value: "</api/orders/1>; rel=\"self\""),
        ],
        body: Array("{\"id\":1}".utf8))

    static func claim(
        _ store: any OrderStore, _ request: IdempotentRequest = request(), token: String, at date: Date = t0,
        staleAfter: TimeInterval = 30
    ) async throws -> IdempotencyClaim {
        try await store.write { tx in
            try tx.claimIdempotencyKey(request, token: token, at: date, staleAfter: staleAfter)
        }
    }

    static func complete(
        _ store: any OrderStore, token: String, response: StoredResponse = created, at date: Date = t0 + 1
    ) async throws -> Bool {
        try await store.write { tx in
            try tx.completeIdempotencyKey("retry-1", of: user, token: token, response: response, at: date)
        }
    }

    static func record(_ store: any OrderStore, key: String = "retry-1") async throws -> IdempotencyRecord? {
        try await store.write { tx in try tx.idempotencyRecord(key, of: user) }
    }

    @Test(arguments: Backend.allCases) func aCompletedKeyReplaysItsResponseAndARunningOneIsInUse(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store async throws in
            #expect(try await Self.claim(store, token: "a") == .claimed)
            #expect(try await Self.claim(store, token: "b", at: t0 + 5) == .inUse)
            let running = try #require(try await Self.record(store))
            #expect(running.response == nil)
            #expect(running.token == "a")
            #expect(running.request == Self.request())

            #expect(try await Self.complete(store, token: "a"))
            #expect(try await Self.complete(store, token: "a") == false, "a response is stored once")
            #expect(try await Self.claim(store, token: "c", at: t0 + 3600) == .replay(Self.created))
            // An empty body and no headers (a 204) round-trip too.
            let empty = StoredResponse(status: 204, headers: [], body: [])
            #expect(try await Self.claim(store, Self.request(key: "delete-1"), token: "d") == .claimed)
            #expect(
                try await store.write { tx in
                    try tx.completeIdempotencyKey("delete-1", of: Self.user, token: "d", response: empty, at: t0)
                })
            #expect(try await Self.claim(store, Self.request(key: "delete-1"), token: "e") == .replay(empty))
        }
    }

    @Test(arguments: Backend.allCases) func anotherRequestUnderTheKeyIsReusedAndKeysArePerUser(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store async throws in
            #expect(try await Self.claim(store, token: "a") == .claimed)
            #expect(try await Self.claim(store, Self.request(body: "{\"x\":1}"), token: "b") == .reused)
            #expect(try await Self.claim(store, Self.request(path: "/api/orders/1"), token: "b") == .reused)
            // Reused wins over stale: an old claim is not taken over by a different request.
            #expect(try await Self.claim(store, Self.request(body: "other"), token: "b", at: t0 + 999) == .reused)
            #expect(try await Self.complete(store, token: "a"))
            #expect(try await Self.claim(store, Self.request(body: "{\"x\":1}"), token: "b") == .reused)
            // The same key of another user is another record.
            #expect(try await Self.claim(store, Self.request(user: UserID(8)), token: "z") == .claimed)
            #expect(try await Self.record(store)?.response == Self.created)
        }
    }

    @Test(arguments: Backend.allCases) func aStaleClaimIsTakenOverAndItsOldTokenCanNoLongerComplete(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store async throws in
            #expect(try await Self.claim(store, token: "dead-node", at: t0) == .claimed)
            #expect(try await Self.claim(store, token: "retry", at: t0 + 29, staleAfter: 30) == .inUse)
            #expect(try await Self.claim(store, token: "retry", at: t0 + 30, staleAfter: 30) == .claimed)
            let taken = try #require(try await Self.record(store))
            #expect(taken.token == "retry")
            #expect(taken.updatedAt == t0 + 30)
            // The first claimant comes back late: it can neither complete nor release the key.
            #expect(try await Self.complete(store, token: "dead-node") == false)
            try await store.write { tx in try tx.releaseIdempotencyKey("retry-1", of: Self.user, token: "dead-node") }
            #expect(try await Self.record(store)?.token == "retry")
            #expect(try await Self.complete(store, token: "retry", at: t0 + 31))
            #expect(try await Self.claim(store, token: "late", at: t0 + 32) == .replay(Self.created))
        }
    }

    @Test(arguments: Backend.allCases) func releaseForgetsAClaimInProgressButNeverAStoredResponse(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store async throws in
            #expect(try await Self.claim(store, token: "a") == .claimed)
            try await store.write { tx in try tx.releaseIdempotencyKey("retry-1", of: Self.user, token: "a") }
            #expect(try await Self.record(store) == nil)
            #expect(try await Self.claim(store, token: "b") == .claimed)
            #expect(try await Self.complete(store, token: "b"))
            try await store.write { tx in try tx.releaseIdempotencyKey("retry-1", of: Self.user, token: "b") }
            #expect(try await Self.record(store)?.response == Self.created)
        }
    }

    /// The response is stored by the transaction that applies the request: if that rolls back, so
    /// does the response, and the key is still in progress.
    @Test(arguments: Backend.allCases) func aResponseCommitsOnlyWithItsTransaction(_ backend: Backend) async throws {
        struct Abort: Error {}
        try await withStore(backend) { store async throws in
            #expect(try await Self.claim(store, token: "a") == .claimed)
            await #expect(throws: Abort.self) {
                try await store.write { tx in
                    _ = try tx.insertCompany(name: "Applied")
                    _ = try tx.completeIdempotencyKey(
                        "retry-1", of: Self.user, token: "a", response: Self.created, at: t0 + 1)
                    throw Abort()
                }
            }
            #expect(try await Self.record(store)?.response == nil)
            let committed = try await store.write { tx in
                let company = try tx.insertCompany(name: "Applied")
                let stored = try tx.completeIdempotencyKey(
                    "retry-1", of: Self.user, token: "a", response: Self.created, at: t0 + 1)
                return (company.id, stored)
            }
            #expect(committed.1)
            #expect(try await store.read { tx in try tx.company(committed.0) }?.name == "Applied")
            #expect(try await Self.record(store)?.response == Self.created)
        }
    }

    @Test(arguments: Backend.allCases) func concurrentClaimsOfOneKeyLetExactlyOneRun(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let claims = try await withThrowingTaskGroup(of: IdempotencyClaim.self) { group in
                for index in 0..<10 { group.addTask { try await Self.claim(store, token: "t\(index)") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(claims.filter { $0 == .claimed }.count == 1)
            #expect(claims.filter { $0 == .inUse }.count == 9)
        }
    }

    @Test(arguments: Backend.allCases) func pruningDeletesRecordsLastWrittenBeforeTheCutoff(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store async throws in
            #expect(try await Self.claim(store, token: "a", at: t0) == .claimed)
            #expect(try await Self.complete(store, token: "a", at: t0 + 100))  // completion counts as a write
            #expect(try await Self.claim(store, Self.request(key: "abandoned"), token: "b", at: t0) == .claimed)
            #expect(try await Self.claim(store, Self.request(key: "recent"), token: "c", at: t0 + 200) == .claimed)

            #expect(try await store.write { tx in try tx.pruneIdempotencyKeys(before: t0 + 100) } == 1)
            #expect(try await Self.record(store, key: "abandoned") == nil)
            #expect(try await Self.record(store)?.response == Self.created)
            #expect(try await store.write { tx in try tx.pruneIdempotencyKeys(before: t0 + 200) } == 1)
            #expect(try await Self.record(store) == nil)
            #expect(try await Self.record(store, key: "recent") != nil)
            // A pruned key is a new key: the same request runs again.
            #expect(try await Self.claim(store, token: "d", at: t0 + 300) == .claimed)
        }
    }
}
