// TEMPORARY: compile-only stand-ins so dependent modules build while the real implementation
// is written. The network implementation replaces this whole file.
final class FrameStorage: Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var count: Int { bytes.count }
}

public final class HTTPServer: Sendable {
    public init(configuration: HTTPServerConfiguration, responder: any HTTPResponder,
                webSocketDelegate: (any WebSocketDelegate)?) { fatalError("not implemented") }
    public func start() throws { fatalError("not implemented") }
    public var port: Int { fatalError("not implemented") }
    public func execute(_ body: @escaping @Sendable (any SocketIO) -> Void) { fatalError("not implemented") }
    public func shutdown() async { fatalError("not implemented") }
    public var liveSessionObjects: Int { fatalError("not implemented") }
}
