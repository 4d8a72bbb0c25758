import Foundation
import Testing

@testable import WaybillTesting

/// The test clusters' folders (`TestClusterFolders`): which leftovers are deleted.
@Suite struct PostgresServerFolderTests {
    let base = FileManager.default.temporaryDirectory
        .appendingPathComponent("pg-folders-\(UUID().uuidString.prefix(8))").path
    let twoHoursAgo = Date().addingTimeInterval(-7200)

    /// A folder as `PostgresServer` leaves it: `owner` (pid and start time), a `postmaster.pid`.
    func folder(
        _ name: String, owner: (pid_t, UInt64)? = nil, postmaster: pid_t? = nil, modified: Date,
        dataModified: Date? = nil
    ) throws -> String {
        let path = base + "/" + name
        try FileManager.default.createDirectory(atPath: path + "/data", withIntermediateDirectories: true)
        if let (pid, started) = owner { try "\(pid) \(started)\n".write(toFile: path + "/owner", atomically: true, encoding: .utf8) }
        if let postmaster {
            try "\(postmaster)\n\(path)/data\n".write(toFile: path + "/data/postmaster.pid", atomically: true, encoding: .utf8)
        }
        try FileManager.default.setAttributes([.modificationDate: dataModified ?? modified], ofItemAtPath: path + "/data")
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
        return path
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// A process running from `folder` (its command line names the data folder, as a postmaster's
    /// `-D` does), written into the folder's `postmaster.pid`.
    func fakePostmaster(in folder: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "while :; do sleep 1; done", folder + "/data"]
        try process.run()
        try "\(process.processIdentifier)\n".write(
            toFile: folder + "/data/postmaster.pid", atomically: true, encoding: .utf8)
        return process
    }

    /// A killed test process leaves its cluster behind, often with its postmaster still running
    /// (`pg_ctl` starts it in a session of its own): in memory it would hold RAM until the next
    /// boot. A folder whose owner is gone is deleted, its postmaster stopped first; one whose
    /// owner runs is kept, however old.
    @Test func aClusterWhoseTestProcessIsGoneIsStoppedAndDeleted() throws {
        defer { try? FileManager.default.removeItem(atPath: base) }
        let me = (getpid(), try #require(TestClusterFolders.startTime(of: getpid())))
        let gone: (pid_t, UInt64) = (Int32.max - 1, 1)
        let reused: (pid_t, UInt64) = (getpid(), me.1 + 1)  // our pid, another start: a process before us
        let mine = try folder("waybill-pg-mine", owner: me, modified: twoHoursAgo)
        let orphan = try folder("waybill-pg-orphan", owner: gone, modified: Date())
        let pidReused = try folder("waybill-pg-reused", owner: reused, modified: Date())
        // A postmaster that outlived its test.
        let survivorFolder = try folder("waybill-pg-survivor", owner: gone, modified: Date())
        let survivor = try fakePostmaster(in: survivorFolder)
        defer { if survivor.isRunning { kill(survivor.processIdentifier, SIGKILL) } }
        // A postmaster.pid whose pid is now another process's (here this test's own, which must
        // not be signalled: SIGQUIT would end it).
        let stalePid = try folder("waybill-pg-stale-pid", owner: gone, postmaster: getpid(), modified: Date())

        TestClusterFolders.removeAbandoned(in: base)

        #expect(exists(mine), "its test process runs")
        #expect(!exists(orphan))
        #expect(!exists(pidReused), "the pid is another process's now")
        #expect(!exists(survivorFolder))
        let until = Date().addingTimeInterval(10)
        while survivor.isRunning, Date() < until { Thread.sleep(forTimeInterval: 0.02) }
        #expect(!survivor.isRunning, "the postmaster left running was stopped")
        #expect(!exists(stalePid))
    }

    /// A folder without an owner (being made: it is claimed right after; or left by an older
    /// version) goes only with no postmaster running there and nothing changed for an hour.
    @Test func aFolderWithoutAnOwnerGoesOnlyWhenIdleForAnHour() throws {
        defer { try? FileManager.default.removeItem(atPath: base) }
        let abandoned = try folder("waybill-pg-abandoned", modified: twoHoursAgo)
        let deadServer = try folder("waybill-pg-dead", postmaster: Int32.max - 1, modified: twoHoursAgo)
        let beingMade = try folder("waybill-pg-new", modified: Date())
        // Made two hours ago; its server stopped a moment ago, by its test, to start it again.
        let justStopped = try folder("waybill-pg-stopped", modified: twoHoursAgo, dataModified: Date())
        let notOurs = try folder("someone-else", modified: twoHoursAgo)
        let running = try folder("waybill-pg-running", modified: twoHoursAgo)
        let postmaster = try fakePostmaster(in: running)
        defer { kill(postmaster.processIdentifier, SIGKILL) }
        try FileManager.default.setAttributes([.modificationDate: twoHoursAgo], ofItemAtPath: running + "/data")

        TestClusterFolders.removeAbandoned(in: base)

        #expect(exists(running), "its postmaster runs")
        #expect(postmaster.isRunning)
        #expect(!exists(abandoned))
        #expect(!exists(deadServer))
        #expect(exists(beingMade), "a cluster being set up is claimed a moment later")
        #expect(exists(justStopped), "its server stopped a moment ago")
        #expect(exists(notOurs))
    }

    /// `WAYBILL_TEST_PG_DIR` chooses the folder outright (a machine whose /dev/shm is small or
    /// counted against a tight memory limit).
    @Test func theEnvironmentChoosesTheFolder() {
        #expect(TestClusterFolders.base(environment: ["WAYBILL_TEST_PG_DIR": base]) == base)
    }
}
