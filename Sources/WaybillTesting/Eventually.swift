import Synchronization

/// Polls `condition` every `poll` until it holds or `timeout` (real time) passes; its last value.
///
/// The way tests wait for something another thread or task does: it returns as soon as the
/// condition holds, so the long default costs a passing run nothing and leaves room for a stalled
/// 2-core runner (README, "Tests"). A cancelled test stops polling (a cancelled sleep returns at
/// once, so the loop would spin).
public func eventually(
    timeout: Duration = .seconds(20), poll: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline, !Task.isCancelled {
        if try await condition() { return true }
        try? await Task.sleep(for: poll)
    }
    return try await condition()
}

/// A moment a test marks, read from another task: whether it had come when something happened
/// (a lease acquired only after the holder's release began, say), where a fixed pause alone
/// could not tell a slow step from a wait.
public final class Moment: Sendable {
    private let flag = Atomic<Bool>(false)
    public init() {}
    public func come() { flag.store(true, ordering: .sequentiallyConsistent) }
    public var hasCome: Bool { flag.load(ordering: .sequentiallyConsistent) }
}
