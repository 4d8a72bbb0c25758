import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

/// Answers with a JSON description of the request; a few paths do something special.
struct EchoResponder: HTTPResponder {
    /// `/small` takes no more than the bodies always allowed (16 KiB).
    func bodyLimit(method: String, path: String) -> Int? { path == "/small" ? 0 : nil }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        switch request.path {
        case "/status/204":
            return HTTPResponse(status: 204, headers: HTTPHeaders([("ETag", "\"v1\"")]))
        case "/status/304":
            return HTTPResponse(status: 304, headers: HTTPHeaders([("ETag", "\"v1\"")]), body: Array("x".utf8))
        case "/status/any":  // whatever status the query names, as a buggy handler or a damaged stored answer may
            return HTTPResponse(status: Int(request.queryValue("code") ?? "") ?? 0, body: Array("odd".utf8))
        case "/big":
            let size = Int(request.queryValue("size") ?? "") ?? 1_000_000
            return HTTPResponse(status: 200, body: (0..<size).map { UInt8($0 % 251) })
        case "/slow":
            let ms = Int(request.queryValue("ms") ?? "") ?? 300
            try? await Task.sleep(for: .milliseconds(ms))
            if let size = Int(request.queryValue("size") ?? "") { return HTTPResponse(status: 200, body: [UInt8](repeating: 0x61, count: size)) }
            return HTTPResponse(status: 200, body: Array("slow".utf8))
        default:
            var headers: [String: String] = [:]
            for (name, value) in request.headers { headers[name] = value }
            let payload: [String: Any] = [
                "method": request.method, "path": request.path,
                "query": request.query.map { "\($0.name)=\($0.value)" },
                "headers": headers, "body": String(decoding: request.body, as: UTF8.self),
                "bodyCount": request.body.count, "remote": request.remoteAddress,
            ]
            let body = try! JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
            return HTTPResponse(
                status: 200,
                headers: HTTPHeaders([("Content-Type", "application/json"), ("Cache-Control", "no-store")]),
                body: Array(body)
            )
        }
    }
}

/// Decodes an `EchoResponder` body.
struct Echo: Decodable {
    var method: String
    var path: String
    var query: [String]
    var headers: [String: String]
    var body: String
    var bodyCount: Int
    var remote: String

    init(_ bytes: [UInt8]) throws { self = try JSONDecoder().decode(Echo.self, from: Data(bytes)) }
}

/// Starts a server on a free port (answering with `responder`), runs `body`, and always shuts the
/// server down.
@discardableResult
func withServer<T>(
    _ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    responder: any HTTPResponder = EchoResponder(),
    delegate: (any WebSocketDelegate)? = nil,
    _ body: (HTTPServer) async throws -> T
) async throws -> T {
    var configuration = HTTPServerConfiguration()
    configuration.port = 0
    // Tests reuse kept-alive connections across steps; on a runner stalled by the parallel suite
    // the 5 s default closed one between two steps. Tests of the keep-alive timer set their own.
    configuration.keepAliveTimeout = .seconds(60)
    configure(&configuration)
    let server = HTTPServer(configuration: configuration, responder: responder, webSocketDelegate: delegate)
    try server.start()
    do {
        let result = try await body(server)
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

/// Sends `raw` on a new connection to `port` and reads one answer; `closed`: whether the server
/// then closed the connection within 3 s.
func answerAndClose(_ raw: String, port: Int) async throws -> (response: RawHTTPResponse, closed: Bool) {
    try await answerAndClose(Array(raw.utf8), port: port)
}

func answerAndClose(_ raw: [UInt8], port: Int) async throws -> (response: RawHTTPResponse, closed: Bool) {
    try await runBlocking {
        let c = try RawConnection(port: port)
        try c.send(raw)
        return (try c.readResponse(), c.waitForClose(timeout: .seconds(3)))
    }
}

/// Opens a raw WebSocket to `/ws/orders/` on `port` and waits until `delegate` has seen it open.
/// - Returns: the client end, which reads and answers nothing by itself (keep it alive: dropping it
///   closes the socket), and the server's id of the socket.
func openRawWebSocket(
    port: Int, receiveBufferSize: Int? = nil, seenBy delegate: RecordingDelegate,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> (raw: RawConnection, socket: SocketID) {
    let raw = try await runBlocking { () -> RawConnection in
        let c = try RawConnection(port: port, receiveBufferSize: receiveBufferSize)
        _ = try c.upgradeToWebSocket("/ws/orders/")
        return c
    }
    #expect(await eventually { !delegate.openedSockets.isEmpty }, sourceLocation: sourceLocation)
    let socket = try #require(delegate.openedSockets.first, sourceLocation: sourceLocation)
    return (raw, socket)
}

/// Counts the jobs it gets and runs them on Dispatch's pool (a preferred executor whose use a
/// test checks).
final class CountingExecutor: TaskExecutor, Sendable {
    let jobs = Atomic<Int>(0)

    func enqueue(_ job: consuming ExecutorJob) {
        jobs.add(1, ordering: .sequentiallyConsistent)
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        DispatchQueue.global().async { job.runSynchronously(on: executor) }
    }
}
