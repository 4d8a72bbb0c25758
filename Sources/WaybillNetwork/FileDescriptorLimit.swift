import Foundation

/// The process's open-file limit, raised so one server can hold tens of thousands of sockets.
///
/// Debian starts processes with a soft `RLIMIT_NOFILE` of 1024 while the hard limit is much higher;
/// raising soft to hard needs no privilege. lws sizes its fd tables from this limit when the context is
/// created, so it must happen first.
enum FileDescriptorLimit {
    /// Raises the soft limit to the hard limit (capped at `cap`, since lws allocates tables of that size)
    /// and returns the soft limit now in force (unchanged if raising failed).
    static func raiseSoftToHard(cap: UInt64 = 1 << 20) -> UInt64 {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 1024 }
        let target = min(limits.rlim_max, rlim_t(cap))
        if limits.rlim_cur < target {
            var raised = limits
            raised.rlim_cur = target
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt64(target) }
        }
        return UInt64(limits.rlim_cur)
    }
}
