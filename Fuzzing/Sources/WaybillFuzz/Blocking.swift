import Dispatch

/// Runs async work to completion from libFuzzer's (synchronous) callback.
///
/// libFuzzer calls `LLVMFuzzerTestOneInput` on the main thread; the work runs on the cooperative
/// pool while the main thread waits, so there is no deadlock.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.value = await body()
        done.signal()
    }
    done.wait()
    return box.value!
}

/// Written once before the semaphore is signalled, read after the wait: no lock needed.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
