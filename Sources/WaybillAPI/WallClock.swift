public import Foundation

/// The wall clock for timestamps, injected so tests can fix time.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The real clock.
public struct SystemWallClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}
