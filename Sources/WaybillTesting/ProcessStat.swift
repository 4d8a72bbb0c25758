import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A process's line in `/proc/PID/stat`, read for tests: its state, parent, start time, CPU time.
public enum ProcessStat {
    /// The fields after `(comm)` (whose name may hold spaces and parentheses): index 0 is the
    /// state (field 3 in proc(5)), 1 the parent's pid, 11 and 12 user and system time in clock
    /// ticks, 19 the start time in ticks after boot. Nil when there is no such process.
    public static func fields(of pid: Int32) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }
}
