import Testing
import WaybillStorage

@testable import WaybillPostgres

/// What a PostgreSQL error means to a caller (`PostgresError.storeError`): the server's trouble
/// is `unavailable` (the API's 503), a client's mistake or a bug is not.
struct PostgresErrorMappingTests {
    /// A full disk (53100), out of memory (53200) or an I/O error (58030) is the server's, and
    /// passes: 503, as on SQLite. They were 500s.
    @Test(arguments: ["53100", "53200", "53400", "58030", "58P01", "53300", "57P01", "08006"])
    func theServersTroubleIsUnavailable(_ state: String) {
        let error = PostgresError(.server, sqlState: state, message: "x")
        guard case .unavailable = error.storeError else {
            Issue.record("\(state): \(error.storeError)")
            return
        }
    }

    @Test(arguments: ["42P01", "42703", "XX000"])
    func aBugIsAFailure(_ state: String) {
        let error = PostgresError(.server, sqlState: state, message: "x")
        guard case .failure = error.storeError else {
            Issue.record("\(state): \(error.storeError)")
            return
        }
    }
}
