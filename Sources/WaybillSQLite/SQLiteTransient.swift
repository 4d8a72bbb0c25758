internal import CSQLite
import Foundation
import WaybillStorage

/// SQLite's `SQLITE_PROTOCOL`: in WAL mode, starting a transaction gives up after SQLite's own
/// retries when the shared-memory WAL index keeps changing under it (many connections, a
/// checkpoint running). Nothing is wrong with the data and the same call works a moment later,
/// so beginning a transaction is retried a few times before the caller sees an error: a busy
/// store must answer slowly, not with a 500.
enum SQLiteTransient {
    static let attempts = 5

    /// Runs `body`; after a transient failure waits a little (growing) and tries again.
    static func retrying<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        var attempt = 0
        while true {
            do throws(SQLiteError) {
                return try body()
            } catch {
                guard error.primaryCode == SQLITE_PROTOCOL, attempt < attempts else { throw error }
                attempt += 1
                pause(attempt)
            }
        }
    }

    /// Whether `error` (as a read closure reports it) is that transient failure.
    static func isTransient(_ error: any Error) -> Bool {
        if case .failure(let code, _)? = error as? StoreError { return code & 0xff == SQLITE_PROTOCOL }
        return false
    }

    /// 1, 2, 4, 8, 16 ms: on the store's own thread, which has nothing else to do meanwhile.
    static func pause(_ attempt: Int) {
        Thread.sleep(forTimeInterval: Double(1 << (attempt - 1)) / 1000)
    }
}
