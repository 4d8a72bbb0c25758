#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Duration {
    /// Whole milliseconds, at least 0, for `poll` (clamped to a day).
    var pollMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let ms = min(seconds, 86_400) * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(ms)
    }

    /// The `timeval` hiredis takes for its connect and socket timeouts.
    var asTimeval: timeval {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return timeval(tv_sec: 0, tv_usec: 0) }
        return timeval(tv_sec: .init(seconds), tv_usec: .init(attoseconds / 1_000_000_000_000))
    }
}
