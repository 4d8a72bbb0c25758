import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where throwaway PostgreSQL clusters (`PostgresServer`) live, and what becomes of the ones a
/// test process left behind.
///
/// In memory (`/dev/shm`) when there is room: on the disk's ext4 the PostgreSQL group spent about a
/// fifth of both cores in `ext4_create` (the inode allocator scanning for recently deleted inodes:
/// every `CREATE DATABASE` makes about 300 files, every drop deletes them), with most of both cores
/// in the kernel for the group's first 15 s, and servers that slow missed tests' 5 s bounds
/// (clean-clone CI, 2026-12-07). A tmpfs has no such scan. The shared cluster peaks near 1.1 GB.
///
/// A cluster in memory holds RAM until it is deleted, and a killed test process cannot delete
/// its own (`atexit` does not run; `pg_ctl` starts the postmaster in a session of its own, so it
/// outlives the process). So each folder records its owner, and the next server made deletes the
/// folders whose owner is gone, stopping a postmaster still running there first.
enum TestClusterFolders {
    static let prefix = "waybill-pg-"
    /// Free space, and free memory, that `/dev/shm` needs to be chosen.
    static let room: UInt64 = 4 << 30
    static let inMemory = "/dev/shm"

    /// As root the server runs as `postgres`, which must be able to reach the folder: /tmp rather
    /// than a TMPDIR that may be private to root.
    static var onDisk: String { getuid() == 0 ? "/tmp" : NSTemporaryDirectory() }

    /// The folder new clusters go to: `WAYBILL_TEST_PG_DIR` when set; else `/dev/shm` when its free
    /// space and the free memory (the machine's, and the memory cgroup's when it has a limit) are
    /// each at least `room`; else the temp folder. Both candidates are cleaned of abandoned
    /// clusters first, so leftovers cannot keep `/dev/shm` from being chosen again.
    static func base(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let chosen = environment["WAYBILL_TEST_PG_DIR"], !chosen.isEmpty { return chosen }
        removeAbandoned(in: inMemory)
        removeAbandoned(in: onDisk)
        var stats = statvfs()
        guard statvfs(inMemory, &stats) == 0, access(inMemory, W_OK | X_OK) == 0,
            UInt64(stats.f_bavail) * UInt64(stats.f_frsize) >= room, freeMemory() >= room
        else { return onDisk }
        return inMemory
    }

    /// Marks `folder` as this process's (its pid and start time, so a reused pid is not taken for it).
    static func claim(_ folder: String) throws {
        try "\(getpid()) \(startTime(of: getpid()) ?? 0)\n".write(
            toFile: folder + "/owner", atomically: true, encoding: .utf8)
    }

    /// Deletes the clusters in `base` that no running process owns: their owner (``claim(_:)``) is
    /// gone, or, for a folder without an owner, no postmaster runs there and neither the folder
    /// nor its data folder changed for an hour (a folder is claimed right after it is made). A
    /// postmaster still running in a deleted folder is stopped first (SIGQUIT, an immediate
    /// shutdown that removes its shared memory; SIGKILL to it and its children after 5 s).
    static func removeAbandoned(in base: String, now: Date = Date()) {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        for entry in entries where entry.hasPrefix(prefix) {
            let folder = (base as NSString).appendingPathComponent(entry)
            let postmaster = runningPostmaster(in: folder)
            if let owner = try? String(contentsOfFile: folder + "/owner", encoding: .utf8) {
                let fields = owner.split(whereSeparator: \.isWhitespace)
                if fields.count == 2, let pid = pid_t(fields[0]), let started = UInt64(fields[1]),
                    startTime(of: pid) == started
                {
                    continue  // its test process runs
                }
            } else {
                guard postmaster == nil, lastChange(of: folder) < now.addingTimeInterval(-3600) else { continue }
            }
            if let postmaster { stop(postmaster) }
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    // MARK: Internals

    /// The pid a cluster's `postmaster.pid` names (its first line), whether or not it still runs.
    static func postmasterPID(inData data: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
            let first = text.split(separator: "\n").first
        else { return nil }
        return pid_t(first)
    }

    /// The pid in `folder`'s `postmaster.pid` when that process runs from `folder` (a pid the
    /// system gave to another process since is not it).
    private static func runningPostmaster(in folder: String) -> pid_t? {
        guard let pid = postmasterPID(inData: folder + "/data"),
            let command = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")),
            String(decoding: command, as: UTF8.self).contains(folder + "/")
        else { return nil }
        return pid
    }

    private static func stop(_ postmaster: pid_t) {
        _ = kill(postmaster, SIGQUIT)
        let deadline = Date().addingTimeInterval(5)
        while isAlive(postmaster), Date() < deadline { usleep(20_000) }
        for pid in processTree(postmaster).reversed() { _ = kill(pid, SIGKILL) }
    }

    /// Whether `pid` runs: it exists and has not ended (a zombie waits only for its parent).
    private static func isAlive(_ pid: pid_t) -> Bool {
        guard let fields = ProcessStat.fields(of: pid), let state = fields.first else { return false }
        return state != "Z" && state != "X"
    }

    /// The later of the folder's and its data folder's modification times: a server its test
    /// stopped a moment ago (to start it again) has just removed its `postmaster.pid` there.
    private static func lastChange(of folder: String) -> Date {
        [folder, folder + "/data"].compactMap {
            (try? FileManager.default.attributesOfItem(atPath: $0))?[.modificationDate] as? Date
        }.max() ?? .distantPast
    }

    /// When `pid` started, in clock ticks after boot (`/proc/PID/stat`, field 22); nil when no such process.
    static func startTime(of pid: pid_t) -> UInt64? {
        ProcessStat.fields(of: pid).flatMap { $0.count > 19 ? UInt64($0[19]) : nil }
    }

    /// `root` and every process whose parent it is (from /proc).
    static func processTree(_ root: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        let children = entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), let fields = ProcessStat.fields(of: pid) else { return nil }
            return fields.count > 1 && pid_t(fields[1]) == root ? pid : nil
        }
        return [root] + children
    }

    /// The memory left to use: `MemAvailable`, and under a memory cgroup (v2) with a limit, that
    /// limit less what the cgroup uses, whichever is smaller (a tmpfs's pages count against both).
    private static func freeMemory() -> UInt64 {
        var free = UInt64.max
        if let info = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8),
            let line = info.split(separator: "\n").first(where: { $0.hasPrefix("MemAvailable:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ UInt64($0) })
        {
            free = kilobytes * 1024
        }
        if let limit = cgroupValue("memory.max"), let used = cgroupValue("memory.current") {
            free = min(free, limit > used ? limit - used : 0)
        }
        return free
    }

    /// A number from this process's cgroup (v2) folder; nil for `max` or when there is none.
    private static func cgroupValue(_ name: String) -> UInt64? {
        guard let membership = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8),
            let line = membership.split(separator: "\n").first(where: { $0.hasPrefix("0::") })
        else { return nil }
        let path = "/sys/fs/cgroup" + line.dropFirst(3) + "/" + name
        return (try? String(contentsOfFile: path, encoding: .utf8))
            .flatMap { UInt64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }
}
