import Dispatch
import Foundation

/// SIGINT and SIGTERM as an async wait, through `DispatchSource` (no work in a C signal handler).
/// `@unchecked Sendable`: `sources` is written once in `init` and only kept alive afterwards.
final class ShutdownSignals: @unchecked Sendable {
    private let stream: AsyncStream<String>
    private let sources: [any DispatchSourceSignal]

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        self.stream = stream
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(number, SIG_IGN)  // let the dispatch source see it instead of the default action
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { @Sendable in continuation.yield(name) }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    /// The name of the next signal received.
    func next() async -> String {
        for await name in stream { return name }
        return "end"
    }
}
