import Foundation
import Testing
import WaybillTesting

@testable import WaybillSQLite

/// `WALGathering`: each commit's WAL bytes reach the file system in one write, and every commit is
/// whole in the file before another connection can see it.
struct SQLiteWALGatheringTests {
    private func openWAL(_ database: TemporaryDatabase) throws -> SQLiteConnection {
        let db = try database.openRawConnection()
        try SQLiteOrderStore.switchToWAL(db)
        return db
    }

    /// A copy of `database`'s file and WAL (while its connections are still open) at `copy`, opened:
    /// with no shared memory beside it, SQLite recovers the copy from its WAL alone.
    private func recoveredCopy(of database: TemporaryDatabase, at copy: TemporaryDatabase) throws -> SQLiteConnection {
        try FileManager.default.createDirectory(
            at: URL(fileURLWithPath: copy.path).deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: database.path, toPath: copy.path)
        if FileManager.default.fileExists(atPath: database.path + "-wal") {
            try FileManager.default.copyItem(atPath: database.path + "-wal", toPath: copy.path + "-wal")
        }
        return try SQLiteConnection(path: copy.path)
    }

    /// The writes a commit of several pages (two tables, an index) made: two per page from SQLite,
    /// one to the file system.
    @Test func aCommitReachesTheFileSystemInOneWrite() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try openWAL(database)
        defer { db.close() }
        // The first commit starts the WAL: SQLite syncs its header, and after a sync the rest of
        // a transaction goes straight out, one write per piece.
        try db.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, v TEXT)")
        let first = try #require(db.walWrites)
        #expect(first.taken > 2)
        #expect(first.made == first.taken)
        try db.executeScript("""
            CREATE TABLE b (id INTEGER PRIMARY KEY, v TEXT);
            CREATE INDEX b_by_v ON b (v);
            """)
        let before = try #require(db.walWrites)
        try db.executeScript("""
            BEGIN IMMEDIATE;
            INSERT INTO a (v) VALUES ('one');
            INSERT INTO b (v) VALUES ('two');
            COMMIT;
            """)
        let after = try #require(db.walWrites)
        #expect(after.taken - before.taken >= 6, "header and page for each of at least three pages")
        #expect(after.made - before.made == 1)
    }

    /// Another connection reads each commit as soon as it returns: its frames are in the file by
    /// then (a commit held back in the buffer would read as missing or broken pages).
    @Test func everyCommitIsReadableAtOnceByAnotherConnection() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let writer = try openWAL(database)
        defer { writer.close() }
        try writer.executeScript("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX t_by_v ON t (v);")
        let reader = try SQLiteConnection(path: database.path)
        defer { reader.close() }
        for round in 1...300 {
            try writer.execute("INSERT INTO t (v) VALUES (?)", [.text(String(repeating: "v\(round)", count: round % 40 + 1))])
            let seen = try reader.queryFirst("SELECT count(*), max(id), sum(length(v)) FROM t") {
                (count: $0.int(0), newest: $0.int(1), length: $0.int(2))
            }
            #expect(seen?.count == round)
            #expect(seen?.newest == round)
        }
        #expect(try reader.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
        let writes = try #require(writer.walWrites)
        #expect(writes.made < writes.taken)
    }

    /// A transaction larger than the buffer, with a cache small enough to spill pages into the WAL
    /// before its commit: it reads its own spilled pages back, and the whole of it is there after.
    @Test func aTransactionLargerThanTheBufferReadsBackWhatItSpilled() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let writer = try openWAL(database)
        defer { writer.close() }
        try writer.executeScript("PRAGMA cache_size = 8; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
        let before = try #require(writer.walWrites)
        let rows = 3_000
        let text = String(repeating: "x", count: 700)
        try writer.execute("BEGIN IMMEDIATE")
        for _ in 0..<rows { try writer.execute("INSERT INTO t (v) VALUES (?)", [.text(text)]) }
        let inside = try writer.queryFirst("SELECT count(*), sum(length(v)) FROM t") { ($0.int(0), $0.int(1)) }
        #expect(inside?.0 == rows)
        #expect(inside?.1 == rows * 700)
        try writer.execute("COMMIT")
        let after = try #require(writer.walWrites)
        let taken = after.taken - before.taken
        let made = after.made - before.made
        #expect(taken > 2 * 400, "about 2 MiB of pages went through the WAL")
        #expect(made > 1 && made * 8 < taken, "several writes, each of many frames")

        let reader = try SQLiteConnection(path: database.path)
        defer { reader.close() }
        #expect(try reader.queryFirst("SELECT count(*), sum(length(v)) FROM t") { ($0.int(0), $0.int(1)) }.map { [$0.0, $0.1] } == [rows, rows * 700])
        #expect(try reader.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
    }

    /// A transaction that spills pages and then changes some of them again makes SQLite correct
    /// its frames' checksums after writing the commit frame (`walRewriteChecksums`): a copy of the
    /// files taken right after the commit, which must recover from the WAL alone (it has no
    /// shared memory), holds the whole commit.
    @Test func aCommitWhoseChecksumsWereCorrectedIsWholeInTheFile() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let writer = try openWAL(database)
        defer { writer.close() }
        try writer.executeScript("PRAGMA cache_size = 8; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
        let text = String(repeating: "y", count: 300)
        try writer.execute("BEGIN IMMEDIATE")
        for _ in 0..<2_000 { try writer.execute("INSERT INTO t (v) VALUES (?)", [.text(text)]) }
        try writer.execute("UPDATE t SET v = 'changed' WHERE id % 50 = 1")  // pages spilled before
        try writer.execute("COMMIT")
        #expect(writer.walWrites?.gathered == 0)
        #expect(FileManager.default.fileExists(atPath: database.path + "-wal"))

        let copy = TemporaryDatabase()
        defer { copy.remove() }
        let recovered = try recoveredCopy(of: database, at: copy)
        defer { recovered.close() }
        let counts = try recovered.queryFirst("SELECT count(*), sum(v = 'changed') FROM t") { [$0.int(0), $0.int(1)] }
        #expect(counts == [2_000, 40])
        #expect(try recovered.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
    }

    /// A transaction that spilled frames and rolled back leaves nothing gathered once it lets go
    /// of the write lock: its frames can never be written later, over frames another process
    /// committed in the meantime.
    @Test func aRolledBackTransactionLeavesNothingGathered() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let writer = try openWAL(database)
        defer { writer.close() }
        try writer.executeScript("PRAGMA cache_size = 8; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
        // Every page back in the database file, then one small commit that starts the WAL over
        // (its header is synced, after which that transaction's writes go straight out): the
        // rollback below then reads nothing from the WAL, which would send the gathered bytes out
        // while the lock is still held.
        #expect(try writer.queryFirst("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) } == 0)
        try writer.execute("INSERT INTO t (v) VALUES ('first')")
        let text = String(repeating: "z", count: 300)
        try writer.execute("BEGIN IMMEDIATE")
        for _ in 0..<1_000 { try writer.execute("INSERT INTO t (v) VALUES (?)", [.text(text)]) }
        let spilled = try #require(writer.walWrites)
        #expect(spilled.gathered > 0, "the cache spilled frames into the WAL")
        try writer.execute("ROLLBACK")
        #expect(writer.walWrites?.gathered == 0)

        let other = try SQLiteConnection(path: database.path)
        defer { other.close() }
        try other.execute("INSERT INTO t (v) VALUES ('kept')")
        #expect(try writer.queryFirst("SELECT count(*), max(v) FROM t") { "\($0.int(0)) \($0.text(1))" } == "2 kept")
        #expect(try writer.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
    }

    /// With 1 KiB pages (the store's) a buffer fills in the middle of a frame: a commit whose
    /// header still fits and whose page does not. Commits of every size around it go out whole at
    /// their commit frame, and none leaves bytes for the lock's release.
    @Test func commitsOfEverySizeGoOutAtTheirCommitFrameWithSmallPages() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let writer = try database.openRawConnection()
        defer { writer.close() }
        try writer.executeScript("PRAGMA page_size = 1024;")
        try SQLiteOrderStore.switchToWAL(writer)
        try writer.executeScript("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
        let reader = try SQLiteConnection(path: database.path)
        defer { reader.close() }
        let text = String(repeating: "p", count: 900)  // a page per row
        var rows = 0
        for size in 95...140 {
            try writer.execute("BEGIN IMMEDIATE")
            for _ in 0..<size { try writer.execute("INSERT INTO t (v) VALUES (?)", [.text(text)]) }
            try writer.execute("COMMIT")
            rows += size
            #expect(try reader.queryFirst("SELECT count(*), sum(length(v)) FROM t") { [$0.int(0), $0.int(1)] } == [rows, rows * 900])
        }
        let writes = try #require(writer.walWrites)
        #expect(writes.atRelease == 0, "a commit left bytes gathered after its commit frame")
        #expect(try reader.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
    }

    /// When another connection has started the WAL over, this connection's next commit lands
    /// below the furthest byte it wrote before; taking the write lock starts its account afresh,
    /// so that commit is still gathered (not taken for rewrites, one write per piece).
    @Test func aCommitAfterAnotherConnectionRestartedTheWALIsGathered() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let first = try openWAL(database)
        defer { first.close() }
        try first.executeScript("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
        let text = String(repeating: "q", count: 3_000)
        for _ in 0..<40 { try first.execute("INSERT INTO t (v) VALUES (?)", [.text(text)]) }
        let second = try SQLiteConnection(path: database.path)
        defer { second.close() }
        try second.executeScript("PRAGMA wal_autocheckpoint = 0;")
        #expect(try second.queryFirst("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) } == 0)
        try second.execute("INSERT INTO t (v) VALUES ('restarted')")
        let before = try #require(first.walWrites)
        try first.execute("INSERT INTO t (v) VALUES (?)", [.text(text)])
        let after = try #require(first.walWrites)
        #expect(after.taken - before.taken >= 4)
        #expect(after.made - before.made == 1)
        #expect(try second.queryFirst("SELECT count(*) FROM t") { $0.int(0) } == 42)
    }

    /// Two writers on one file (each with its own WAL handle and buffer, as two processes have),
    /// taking turns with transactions of every size: small ones, ones that spill into the WAL, some
    /// rolled back, while a third connection checkpoints and starts the WAL over. Every committed
    /// row is there and no rolled-back one, for a reader, and in a copy of the files recovered
    /// from its WAL alone. An end-to-end check: the rules overlap (a rollback here reads from the
    /// WAL, which sends gathered bytes out as the lock's release would), so each rule alone is
    /// pinned by the tests above; this one fails when the read and the release both forget.
    @Test func twoWritersTakingTurnsWithRollbacksAndRestartsLoseNothing() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let setup = try openWAL(database)
        try setup.executeScript("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (id INTEGER PRIMARY KEY, writer INTEGER, v TEXT);")
        setup.close()
        let writers = [try SQLiteConnection(path: database.path), try SQLiteConnection(path: database.path)]
        defer { writers.forEach { $0.close() } }
        for writer in writers { try writer.executeScript("PRAGMA wal_autocheckpoint = 0; PRAGMA cache_size = 8;") }
        let checkpointer = try SQLiteConnection(path: database.path)
        defer { checkpointer.close() }
        var random = SeededGenerator(seed: 20_261_206)
        var committed = [0, 0]
        for round in 0..<120 {
            let index = round % 2
            let writer = writers[index]
            let rows = [1, 3, 40, 400][Int.random(in: 0..<4, using: &random)]
            let keep = Int.random(in: 0..<4, using: &random) != 0
            try writer.execute("BEGIN IMMEDIATE")
            for row in 0..<rows {
                try writer.execute("INSERT INTO t (writer, v) VALUES (?, ?)", [.integer(Int64(index)), .text("r\(round)-\(row)-" + String(repeating: "w", count: 200))])
            }
            try writer.execute(keep ? "COMMIT" : "ROLLBACK")
            if keep { committed[index] += rows }
            #expect(writer.walWrites?.gathered == 0)
            if round % 9 == 8 {
                let mode = ["PASSIVE", "RESTART", "TRUNCATE"][Int.random(in: 0..<3, using: &random)]
                _ = try checkpointer.queryFirst("PRAGMA wal_checkpoint(\(mode))") { $0.int(0) }
            }
        }
        func counts(_ db: SQLiteConnection) throws -> [Int] {
            try db.query("SELECT writer, count(*) FROM t GROUP BY writer ORDER BY writer") { $0.int(1) }
        }
        #expect(try counts(checkpointer) == committed)
        #expect(try checkpointer.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")

        let copy = TemporaryDatabase()
        defer { copy.remove() }
        let recovered = try recoveredCopy(of: database, at: copy)
        defer { recovered.close() }
        #expect(try counts(recovered) == committed)
        #expect(try recovered.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
    }

    /// After a checkpoint empties the WAL, the writer starts it over from its first frame (a
    /// write that does not follow on from the gathered bytes): every row stays, across reopening.
    @Test func theLogStartsOverAfterACheckpointAndStaysWhole() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        do {
            let writer = try openWAL(database)
            defer { writer.close() }
            try writer.executeScript("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
            let checkpointer = try SQLiteConnection(path: database.path)
            defer { checkpointer.close() }
            for round in 1...60 {
                try writer.execute("INSERT INTO t (v) VALUES (?)", [.text("row \(round)")])
                if round % 20 == 0 {
                    let mode = round == 40 ? "TRUNCATE" : "RESTART"
                    let busy = try checkpointer.queryFirst("PRAGMA wal_checkpoint(\(mode))") { $0.int(0) }
                    #expect(busy == 0)
                }
            }
        }
        let reopened = try SQLiteConnection(path: database.path)
        defer { reopened.close() }
        #expect(try reopened.queryFirst("SELECT count(*), max(id) FROM t") { [$0.int(0), $0.int(1)] } == [60, 60])
        #expect(try reopened.queryFirst("PRAGMA integrity_check") { $0.text(0) } == "ok")
    }
}

/// `WALGatherBuffer` on its own, against a file that records each write it is handed.
struct WALGatherBufferTests {
    private final class FileWrites {
        var writes: [(offset: Int64, bytes: [UInt8])] = []
        var answer: Int32 = 0
        func write(_ bytes: UnsafeRawPointer, _ count: Int32, _ offset: Int64) -> Int32 {
            writes.append((offset, Array(UnsafeRawBufferPointer(start: bytes, count: Int(count)))))
            return answer
        }
    }

    private static let page = 512
    private static func header(commit: Bool, fill: UInt8) -> [UInt8] {
        var bytes = [UInt8](repeating: fill, count: 24)
        bytes[4...7] = commit ? [0, 0, 0, 9] : [0, 0, 0, 0]
        return bytes
    }

    private func write(_ buffer: WALGatherBuffer, _ bytes: [UInt8], at offset: Int64, _ file: FileWrites) -> Int32 {
        bytes.withUnsafeBytes { buffer.write($0.baseAddress!, bytes.count, at: offset, to: file.write) }
    }

    /// Frames run on from the WAL's header; nothing goes out until the commit frame's page, then all
    /// of it in one write, at the first byte's offset.
    @Test func framesGoOutTogetherWhenTheCommitFramesPageIsWritten() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        var offset: Int64 = 0
        var expected: [UInt8] = []
        func put(_ bytes: [UInt8]) {
            #expect(write(buffer, bytes, at: offset, file) == 0)
            offset += Int64(bytes.count)
            expected += bytes
        }
        put([UInt8](repeating: 0x37, count: 32))  // the WAL header: its bytes 4–7 are not zero
        put(Self.header(commit: false, fill: 1))
        put([UInt8](repeating: 0xA1, count: Self.page))
        put(Self.header(commit: false, fill: 2))
        put([UInt8](repeating: 0xA2, count: Self.page))
        put(Self.header(commit: true, fill: 3))
        #expect(file.writes.isEmpty)
        put([UInt8](repeating: 0xA3, count: Self.page))
        #expect(file.writes.count == 1)
        #expect(file.writes.first?.offset == 0)
        #expect(file.writes.first?.bytes == expected)
        #expect(buffer.count == 0)
        #expect(buffer.writesTaken == 7 && buffer.writesMade == 1)
    }

    /// A page whose own bytes 4–7 are not zero is not mistaken for a commit, and a header and page
    /// written together as one commit frame go out at once.
    @Test func onlyACommitHeaderEndsTheGathering() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        let busyPage = [UInt8](repeating: 0xFF, count: Self.page)
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(write(buffer, busyPage, at: 56, file) == 0)
        #expect(file.writes.isEmpty)
        let whole = Self.header(commit: true, fill: 2) + busyPage
        #expect(write(buffer, whole, at: 56 + Int64(Self.page), file) == 0)
        #expect(file.writes.count == 1)
        #expect(file.writes.first?.bytes.count == 24 + Self.page + whole.count)
    }

    /// A write before the furthest byte written (SQLite rewriting a spilled page in place) goes
    /// straight to the file after what was gathered, and so does a write larger than the buffer.
    @Test func aRewriteOrAWriteThatDoesNotFitGoesStraightOut() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 1_024)
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56, file) == 0)
        #expect(file.writes.isEmpty)
        #expect(write(buffer, [UInt8](repeating: 2, count: Self.page), at: 56, file) == 0)  // rewritten
        #expect(file.writes.map(\.offset) == [32, 56])
        #expect(file.writes.map(\.bytes.count) == [24 + Self.page, Self.page])
        #expect(buffer.count == 0)
        #expect(write(buffer, [UInt8](repeating: 3, count: 2_048), at: 2_000, file) == 0)
        #expect(file.writes.map(\.offset) == [32, 56, 2_000])
        #expect(buffer.count == 0)
    }

    /// After a commit, SQLite may correct the checksums in the headers of the transaction's frames,
    /// the commit frame's last (`walRewriteChecksums`, when a spilled page was written again): each
    /// goes to the file at once, not held back as the start of another commit frame.
    @Test func checksumsCorrectedAfterACommitGoStraightOut() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        let frame = Int64(24 + Self.page)
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56, file) == 0)
        #expect(write(buffer, Self.header(commit: true, fill: 2), at: 32 + frame, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 2, count: Self.page), at: 56 + frame, file) == 0)
        #expect(file.writes.count == 1)
        #expect(write(buffer, Self.header(commit: false, fill: 3), at: 32, file) == 0)
        #expect(write(buffer, Self.header(commit: true, fill: 4), at: 32 + frame, file) == 0)
        #expect(buffer.count == 0)
        #expect(file.writes.map(\.offset) == [32, 32, 32 + frame])
        #expect(file.writes.last?.bytes == Self.header(commit: true, fill: 4))
    }

    /// A write of any other size (a frame split at a sync point) goes straight out, after what was
    /// gathered; the WAL's own header is gathered with the frames after it.
    @Test func aWriteOfAnyOtherSizeGoesStraightOut() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        #expect(write(buffer, [UInt8](repeating: 9, count: 32), at: 0, file) == 0)
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(file.writes.isEmpty)
        #expect(write(buffer, [UInt8](repeating: 1, count: 300), at: 56, file) == 0)
        #expect(file.writes.map(\.offset) == [0, 56])
        #expect(file.writes.map(\.bytes.count) == [56, 300])
        #expect(buffer.count == 0)
    }

    /// Taking the write lock starts a new account: another writer may have started the WAL over
    /// (a second process), so frames below this handle's furthest byte are appends again.
    @Test func aNewWriteTransactionGathersFromWhereverTheWALNowEnds() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        let frame = Int64(24 + Self.page)
        for index in 0..<4 {
            #expect(write(buffer, Self.header(commit: index == 3, fill: 1), at: 32 + Int64(index) * frame, file) == 0)
            #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56 + Int64(index) * frame, file) == 0)
        }
        #expect(file.writes.count == 1)
        buffer.beginWriting()
        #expect(write(buffer, Self.header(commit: false, fill: 2), at: 32 + frame, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 2, count: Self.page), at: 56 + frame, file) == 0)
        #expect(file.writes.count == 1)
        #expect(buffer.count == 24 + Self.page)
    }

    /// Bytes that fail to go out before a read, a sync or any other call are reported as a failed
    /// write (an I/O error, which rolls the whole transaction back), a full disk included.
    @Test func aFailureBeforeAnotherCallIsAnIOError() {
        let ioerrWrite: Int32 = 10 | (3 << 8)
        #expect(WALGathering.failureBeforeCall(0) == 0)
        #expect(WALGathering.failureBeforeCall(13) == ioerrWrite)  // SQLITE_FULL
        #expect(WALGathering.failureBeforeCall(ioerrWrite) == ioerrWrite)
        #expect(WALGathering.failureBeforeCall(10 | (13 << 8)) == 10 | (13 << 8))  // another I/O error, as it is
    }

    /// A commit frame's header that fits when its page does not: the flush before the page does
    /// not forget the commit, and the page goes out at once.
    @Test func aCommitPageThatNoLongerFitsStillGoesOutAtOnce() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 1_000)
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56, file) == 0)
        #expect(write(buffer, Self.header(commit: true, fill: 2), at: 568, file) == 0)
        #expect(file.writes.isEmpty)
        #expect(write(buffer, [UInt8](repeating: 2, count: Self.page), at: 592, file) == 0)
        #expect(buffer.count == 0)
        #expect(file.writes.map(\.offset) == [32, 592])
    }

    /// After a sync inside a write transaction (a new WAL's header; every commit under
    /// `synchronous=FULL`, whose frames SQLite may split at the sync point), the rest of the
    /// transaction goes straight out; the next one gathers again.
    @Test func afterASyncTheRestGoesStraightOut() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        #expect(write(buffer, [UInt8](repeating: 9, count: 32), at: 0, file) == 0)
        #expect(buffer.flush(to: file.write) == 0)
        buffer.synced()
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56, file) == 0)
        #expect(file.writes.map(\.offset) == [0, 32, 56])
        #expect(buffer.count == 0)
        buffer.beginWriting()
        #expect(write(buffer, Self.header(commit: false, fill: 2), at: 568, file) == 0)
        #expect(buffer.count == 24)
    }

    /// Once gathered bytes were dropped by a failed write, every later write of the transaction
    /// fails, so no commit can go out over the hole; the next transaction writes again.
    @Test func afterAFailedFlushEveryWriteFailsUntilTheTransactionEnds() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 8_192)
        let ioerrWrite: Int32 = 10 | (3 << 8)
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        file.answer = 13
        #expect(buffer.flush(to: file.write) == 13)
        file.answer = 0
        #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56, file) == ioerrWrite)
        #expect(write(buffer, Self.header(commit: true, fill: 2), at: 568, file) == ioerrWrite)
        buffer.endWriting()
        buffer.beginWriting()
        #expect(write(buffer, Self.header(commit: true, fill: 3), at: 32, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 3, count: Self.page), at: 56, file) == 0)
        #expect(file.writes.last?.bytes.count == 24 + Self.page)
    }

    /// No write it makes is longer than the default VFS takes in one call (it keeps 17 bits of a
    /// length), whatever capacity it is asked for.
    @Test func noWriteIsLongerThanTheFileSystemTakes() {
        let file = FileWrites()
        let buffer = WALGatherBuffer(capacity: 1 << 20)
        #expect(buffer.capacity <= 0x1FFFF)
        #expect(WALGatherBuffer.defaultCapacity <= buffer.capacity)
        var offset: Int64 = 32
        for frame in 0..<300 {
            #expect(write(buffer, Self.header(commit: false, fill: UInt8(frame % 200)), at: offset, file) == 0)
            #expect(write(buffer, [UInt8](repeating: 7, count: 4_096), at: offset + 24, file) == 0)
            offset += 24 + 4_096
        }
        #expect(buffer.flush(to: file.write) == 0)
        #expect(file.writes.allSatisfy { $0.bytes.count <= 0x1FFFF })
        #expect(file.writes.reduce(0) { $0 + $1.bytes.count } == 300 * (24 + 4_096))
    }

    /// The file system's error comes back from the write that sent the bytes (here the commit's),
    /// and nothing stays gathered after it.
    @Test func aFailedWriteIsReportedByTheCallThatMadeIt() {
        let file = FileWrites()
        file.answer = 13  // SQLITE_FULL
        let buffer = WALGatherBuffer(capacity: 8_192)
        #expect(write(buffer, Self.header(commit: true, fill: 1), at: 32, file) == 0)
        #expect(write(buffer, [UInt8](repeating: 1, count: Self.page), at: 56, file) == 13)
        #expect(buffer.count == 0)
        file.answer = 0
        buffer.beginWriting()  // SQLite writes the transaction again
        #expect(write(buffer, Self.header(commit: false, fill: 1), at: 32, file) == 0)
        #expect(buffer.count == 24)
        #expect(buffer.flush(to: file.write) == 0)
        #expect(file.writes.last?.bytes.count == 24)
    }
}
