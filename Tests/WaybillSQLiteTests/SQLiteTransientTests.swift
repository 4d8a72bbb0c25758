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
