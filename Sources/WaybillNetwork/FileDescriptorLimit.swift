import Foundation

/// The process's open-file limit, set so one server can hold tens of thousands of sockets.
///
/// Debian starts processes with a soft `RLIMIT_NOFILE` of 1024 while the hard limit is much higher;
/// raising soft to hard needs no privilege. lws sizes its fd tables from this limit when the context is
/// created, so it must happen first.
enum FileDescriptorLimit {
    /// Sets the soft limit to the hard limit, capped at `cap` (lws allocates tables of that size),
    /// and returns the soft limit now in force (unchanged if setting it failed).
    ///
    /// A soft limit above the cap is lowered to it, not left. lws 4.1 takes a limit above 10 000 000
    /// for a mistake and then serves only 2 560 descriptors (`lws_create_context`, "unreasonable
    /// ulimit -n workaround"): with systemd's `LimitNOFILE=infinity` (1 073 741 816), a server
    /// refused every socket past the 2 560th. Found by a review, 2026-12-06.
    static func raiseSoftToHard(cap: UInt64 = 1 << 20) -> UInt64 {
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limits) == 0 else { return 1024 }
        guard let target = newSoftLimit(current: UInt64(limits.rlim_cur), hard: UInt64(limits.rlim_max), cap: cap)
        else { return UInt64(limits.rlim_cur) }
        var changed = limits
        changed.rlim_cur = rlim_t(target)
        return setrlimit(Int32(RLIMIT_NOFILE.rawValue), &changed) == 0 ? target : UInt64(limits.rlim_cur)
    }

    /// The soft limit to set, or `nil` to leave it: the hard limit, at most `cap`. A soft limit is
    /// never above the hard one, so one above the cap is lowered to it (which needs no privilege
    /// either).
    static func newSoftLimit(current: UInt64, hard: UInt64, cap: UInt64) -> UInt64? {
        let target = min(hard, cap)
        return target == current ? nil : target
    }
}
