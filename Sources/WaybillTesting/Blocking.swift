import Foundation

/// Runs blocking work (such as `RawConnection` calls) on a fresh thread and awaits its result.
///
/// Blocking inside a test's task would hold one of the few cooperative-pool threads (two on a
/// two-core machine), which the server under test needs for its own handler tasks.
/// ```swift
/// let status = try await runBlocking {
///     let c = try RawConnection(port: port)
///     try c.send(RawConnection.request("GET", "/health"))
///     return try c.readResponse().status
/// }
/// ```
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes (blocking; for `runBlocking`
/// bodies). Returns whether it held.
public func pollUntil(timeout: Duration = .seconds(5), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return condition()
}

/// What `body` returned or threw, so that cleanup that must be awaited (a `defer` cannot) runs
/// either way before the outcome is passed on.
public func outcome<T>(of body: () async throws -> T) async -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}
