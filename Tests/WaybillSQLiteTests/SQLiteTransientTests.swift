import Testing
import WaybillStorage

@testable import WaybillSQLite

/// `SQLITE_PROTOCOL` (15) when a transaction starts is retried; nothing else is.
struct SQLiteTransientTests {
    private static let protocolError = SQLiteError(code: 15, message: "locking protocol")

    @Test func aTransientFailureIsRetriedUntilItPasses() throws {
        var calls = 0
        let value = try SQLiteTransient.retrying { () throws(SQLiteError) -> Int in
            calls += 1
            if calls < 3 { throw Self.protocolError }
            return 42
        }
        #expect(value == 42)
        #expect(calls == 3)
    }

    @Test func otherFailuresAreNotRetried() {
        var calls = 0
        #expect(throws: SQLiteError.self) {
            try SQLiteTransient.retrying { () throws(SQLiteError) in
                calls += 1
                throw SQLiteError(code: 19, message: "constraint failed")
            }
        }
        #expect(calls == 1)
    }

    @Test func aFailureThatPersistsReachesTheCallerAfterTheLastAttempt() {
        var calls = 0
        #expect(throws: SQLiteError.self) {
            try SQLiteTransient.retrying { () throws(SQLiteError) in
                calls += 1
                throw Self.protocolError
            }
        }
        #expect(calls == SQLiteTransient.attempts + 1)
    }

    @Test func readsRecogniseItThroughTheStoreError() {
        #expect(SQLiteTransient.isTransient(Self.protocolError.storeError))
        #expect(!SQLiteTransient.isTransient(StoreError.notFound))
        #expect(!SQLiteTransient.isTransient(StoreError.failure(code: 19, message: "constraint")))
    }
}

/// What the API answers for a store failure follows `storeError`: a full disk, an I/O error, a
/// file replaced under the server, out of memory, or a batch rolled back by another write's error
/// are `.unavailable` (503, retried by clients); they were `.failure` (500), which the driver app
/// counts toward giving an action up.
struct SQLiteStoreErrorTests {
    @Test(arguments: [
        (Int32(13), "SQLITE_FULL"), (Int32(10), "SQLITE_IOERR"), (Int32(10 | (3 << 8)), "SQLITE_IOERR_WRITE"),
        (Int32(8 | (1 << 8)), "SQLITE_READONLY_RECOVERY"), (Int32(8 | (2 << 8)), "SQLITE_READONLY_CANTLOCK"),
        (Int32(7), "SQLITE_NOMEM"), (Int32(4), "SQLITE_ABORT"),
    ] as [(Int32, String)])
    func failuresAClientCanRetryAreUnavailable(code: Int32, name: String) {
        guard case .unavailable = SQLiteError(code: code, message: name).storeError else {
            Issue.record("\(name) is not .unavailable")
            return
        }
    }

    /// A corrupt file, a write refused as read-only (a reader's `query_only`: a bug) or a file moved
    /// away need someone to look: a 500, not a retry that looks like an outage.
    @Test(arguments: [
        (Int32(11), "SQLITE_CORRUPT"), (Int32(8), "SQLITE_READONLY"), (Int32(8 | (4 << 8)), "SQLITE_READONLY_DBMOVED"),
    ] as [(Int32, String)])
    func failuresThatNeedSomeoneAreStillFailures(code: Int32, name: String) {
        guard case .failure = SQLiteError(code: code, message: name).storeError else {
            Issue.record("\(name) is not .failure")
            return
        }
    }
}
