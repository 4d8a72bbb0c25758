import Foundation
import Testing
import WaybillNetwork
import WaybillObservability
import WaybillSQLite

@testable import WaybillAPI

/// Requests that change orders run on the store's writer thread (`OrderStore.writeExecutor`);
/// reads, logins and everything else stay on the global executor.
@Suite struct WriterExecutorRoutingTests {
    private func request(_ method: String, _ path: String) -> HTTPRequest {
        HTTPRequest(method: method, path: path, query: [], headers: HTTPHeaders(), body: [], remoteAddress: "")
    }

    @Test func orderChangesRunOnTheWriter() {
        for (method, path) in [
            ("POST", "/api/orders/"), ("POST", "/api/orders"), ("PATCH", "/api/orders/42/"),
            ("DELETE", "/api/orders/42/"), ("POST", "/api/orders/42/status"), ("POST", "/api/orders/42/assign"),
        ] {
            #expect(APIResponder.runsOnWriter(request(method, path)), "\(method) \(path)")
        }
    }

    @Test func everythingElseDoesNot() {
        for (method, path) in [
            ("GET", "/api/orders/"), ("GET", "/api/orders/42/"), ("HEAD", "/api/orders/"), ("OPTIONS", "/api/orders/"),
            ("POST", "/api/auth/login"), ("POST", "/api/ws-ticket"), ("GET", "/healthz"), ("POST", "/api/ordersx"),
        ] {
            #expect(!APIResponder.runsOnWriter(request(method, path)), "\(method) \(path)")
        }
    }

    /// The server wraps its store: the wrapper must pass the executor on, or every request would
    /// silently lose it (as `health` once was lost the same way).
    @Test func theMeteredStoreForwardsTheWriterExecutor() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exec-\(UUID().uuidString)/w.sqlite").path
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let store = try SQLiteOrderStore(path: path, readerCount: 1)
        defer { store.close() }
        let metered = MeteredOrderStore(store, metrics: Metrics())
        let inner = try #require(store.writeExecutor), outer = try #require(metered.writeExecutor)
        #expect(ObjectIdentifier(inner as AnyObject) == ObjectIdentifier(outer as AnyObject))
    }
}
