import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

@Suite struct SQLiteOrderStoreUsersTests {
    @Test func usersAndCompaniesReadBack() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let found = try await store.read { tx in
                (
                    try tx.company(fixture.acme.id), try tx.user(fixture.bob.id), try tx.drivers(in: fixture.acme.id),
                    try tx.company(CompanyID(999)), try tx.user(UserID(999))
                )
            }
            #expect(found.0 == fixture.acme)
            #expect(found.1 == fixture.bob)
            #expect(found.2 == [fixture.alice, fixture.bob])
            #expect(found.3 == nil)
            #expect(found.4 == nil)
        }
    }

    @Test func emailIsUniqueIgnoringCaseAndFoundIgnoringCase() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            await #expect(throws: StoreError.self) {
                try await store.write { tx in
                    try tx.insertUser(
                        companyID: nil, role: .driver, email: "ALICE@Acme.Test", name: "Imposter", passwordHash: "x")
                }
            }
            do {
                _ = try await store.write { tx in
                    try tx.insertUser(
                        companyID: nil, role: .driver, email: "Élodie@acme.test", name: "É", passwordHash: "x")
                }
                _ = try await store.write { tx in
                    try tx.insertUser(
                        companyID: nil, role: .driver, email: "éLODIE@ACME.TEST", name: "é", passwordHash: "y")
                }
                Issue.record("a non-ASCII email differing only in case was accepted")
            } catch let error as StoreError {
                guard case .conflict = error else { throw error }
            }
            let found = try await store.read { tx in try tx.credentials(email: "Alice@ACME.test") }
            #expect(found?.user == fixture.alice)
            #expect(found?.passwordHash == "h2")
            #expect(try await store.read { tx in try tx.credentials(email: "nobody@acme.test") } == nil)
        }
    }

    @Test func emailConflictIsAConflict() async throws {
        try await withStore { store, _ in
            _ = try await Fixture.seed(store)
            let error = await #expect(throws: StoreError.self) {
                try await store.write { tx in
                    try tx.insertUser(
                        companyID: nil, role: .driver, email: "BOB@acme.test", name: "B", passwordHash: "x")
                }
            }
            guard case .conflict = error else {
                Issue.record("expected a conflict, got \(String(describing: error))")
                return
            }
        }
    }

    @Test func tokensAuthenticateByHashUntilRevokedOrExpired() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let forever: [UInt8] = Array(repeating: 1, count: 32)
            let shortLived: [UInt8] = Array(repeating: 2, count: 32)
            let bobs: [UInt8] = Array(repeating: 3, count: 32)
            try await store.write { tx in
                try tx.insertToken(hash: forever, for: fixture.alice.id, createdAt: t0, expiresAt: nil)
                try tx.insertToken(hash: shortLived, for: fixture.alice.id, createdAt: t0, expiresAt: t0 + 60)
                try tx.insertToken(hash: bobs, for: fixture.bob.id, createdAt: t0, expiresAt: nil)
            }
            let before = try await store.read { tx in
                (
                    try tx.user(tokenHash: forever, now: t0), try tx.user(tokenHash: shortLived, now: t0 + 59),
                    try tx.user(tokenHash: shortLived, now: t0 + 60),
                    try tx.user(tokenHash: Array(repeating: 9, count: 32), now: t0)
                )
            }
            #expect(before.0 == fixture.alice)
            #expect(before.1 == fixture.alice)
            #expect(before.2 == nil, "an expired token must not authenticate")
            #expect(before.3 == nil)

            try await store.write { tx in try tx.revokeTokens(of: fixture.alice.id) }
            let after = try await store.read { tx in
                (try tx.user(tokenHash: forever, now: t0), try tx.user(tokenHash: bobs, now: t0))
            }
            #expect(after.0 == nil, "a revoked token must not authenticate")
            #expect(after.1 == fixture.bob, "revoking one user's tokens leaves others alone")
        }
    }

    @Test func aTicketWorksOnceAndNotAfterExpiry() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let ticket: [UInt8] = Array(repeating: 7, count: 32)
            let stale: [UInt8] = Array(repeating: 8, count: 32)
            try await store.write { tx in
                try tx.insertTicket(hash: ticket, for: fixture.alice.id, expiresAt: t0 + 60)
                try tx.insertTicket(hash: stale, for: fixture.bob.id, expiresAt: t0 + 10)
            }
            let uses = try await store.write { tx in
                (try tx.consumeTicket(hash: ticket, now: t0 + 5), try tx.consumeTicket(hash: ticket, now: t0 + 6))
            }
            #expect(uses.0 == fixture.alice.id)
            #expect(uses.1 == nil, "a ticket is single use")
            #expect(try await store.write { tx in try tx.consumeTicket(hash: stale, now: t0 + 10) } == nil)
            #expect(
                try await store.write { tx in try tx.consumeTicket(hash: stale, now: t0) } == nil,
                "an expired ticket is deleted when presented")
        }
    }

    @Test func expiredTicketsAreSweptWhenAnyTicketIsConsumed() async throws {
        try await withStore { store, path in
            let fixture = try await Fixture.seed(store)
            try await store.write { tx in
                for index in 0..<5 {
                    try tx.insertTicket(hash: [UInt8(index)], for: fixture.alice.id, expiresAt: t0 + Double(index))
                }
            }
            _ = try await store.write { tx in try tx.consumeTicket(hash: [0xFF], now: t0 + 3) }
            #expect(try rawQuery(path, "SELECT count(*) FROM ws_tickets") == ["1"])
        }
    }

    @Test func anEmptyHashIsStoredAsAnEmptyBlobNotNull() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let user = try await store.write { tx in
                try tx.insertTicket(hash: [], for: fixture.alice.id, expiresAt: t0 + 60)
                return try tx.consumeTicket(hash: [], now: t0)
            }
            #expect(user == fixture.alice.id)
        }
    }
}
