import Foundation
import Testing

@testable import WaybillTesting

/// The test clusters' folders (`PostgresServer`): which leftovers are deleted.
@Suite struct PostgresServerFolderTests {
    /// A killed test run leaves its cluster behind; in memory it would hold RAM until the next
    /// boot. Only folders of ours, untouched for an hour, whose postmaster is not running go.
    @Test func onlyAbandonedClustersOfOursAreDeleted() throws {
        let base = FileManager.default.temporaryDirectory
            .appendingPathComponent("pg-folders-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let twoHoursAgo = Date().addingTimeInterval(-7200)
        func folder(_ name: String, pid: Int32? = nil, modified: Date, dataModified: Date? = nil) throws -> String {
            let path = base + "/" + name
            try FileManager.default.createDirectory(atPath: path + "/data", withIntermediateDirectories: true)
            if let pid {
                try "\(pid)\n/some/data\n".write(toFile: path + "/data/postmaster.pid", atomically: true, encoding: .utf8)
            }
            try FileManager.default.setAttributes(
                [.modificationDate: dataModified ?? modified], ofItemAtPath: path + "/data")
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
            return path
        }
        let abandoned = try folder("waybill-pg-abandoned", modified: twoHoursAgo)
        let deadServer = try folder("waybill-pg-dead", pid: Int32.max - 1, modified: twoHoursAgo)
        let beingMade = try folder("waybill-pg-new", modified: Date())
        let running = try folder("waybill-pg-running", pid: getpid(), modified: twoHoursAgo)
        let notOurs = try folder("someone-else", modified: twoHoursAgo)
        // Made two hours ago; its server stopped a moment ago, by its test, to start it again.
        let justStopped = try folder("waybill-pg-stopped", modified: twoHoursAgo, dataModified: Date())

        PostgresServer.removeAbandonedClusters(in: base)

        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(!FileManager.default.fileExists(atPath: deadServer))
        #expect(FileManager.default.fileExists(atPath: beingMade), "a cluster being set up has no postmaster.pid yet")
        #expect(FileManager.default.fileExists(atPath: running), "its server runs")
        #expect(FileManager.default.fileExists(atPath: notOurs))
        #expect(FileManager.default.fileExists(atPath: justStopped), "its server stopped a moment ago")
    }
}
