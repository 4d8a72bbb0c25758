import Synchronization

/// Drains an `AsyncStream` on its own task and lets a test wait, with a deadline, for what arrived.
///
/// ```swift
/// let subscription = StreamCollector(broker.subscribe())
/// #expect(await subscription.wait { $0.contains(.subscribed) })
/// ```
/// `cancel()` (or dropping the collector) cancels the task, which terminates the stream: that is how a
/// test plays a consumer that goes away.
public final class StreamCollector<Element: Sendable>: Sendable {
    private struct State {
        var elements: [Element] = []
        var isFinished = false
    }

    /// A class around the lock, so the consuming task can share it (a `Mutex` cannot be captured).
    private final class Storage: Sendable { let state = Mutex(State()) }

    private let storage = Storage()
    private let task = Mutex<Task<Void, Never>?>(nil)

    public init(_ stream: AsyncStream<Element>) {
        let consumer = Task { [storage] in
            for await element in stream { storage.state.withLock { $0.elements.append(element) } }
            storage.state.withLock { $0.isFinished = true }
        }
        task.withLock { $0 = consumer }
    }

    deinit { task.withLock { $0?.cancel() } }

    /// Everything received so far, in order.
    public var elements: [Element] { storage.state.withLock { $0.elements } }

    /// Whether the stream ended (cancelled, or finished by its producer).
    public var isFinished: Bool { storage.state.withLock { $0.isFinished } }

    /// Stops consuming; the stream terminates.
    public func cancel() { task.withLock { $0?.cancel() } }

    /// Waits until `condition` holds for what has arrived, checking every 10 ms, or until `timeout`
    /// passes. Returns whether it held.
    public func wait(timeout: Duration = .seconds(5), until condition: ([Element]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(elements) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(elements)
    }
}
