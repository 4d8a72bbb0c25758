import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

/// Texts are bound from their UTF-8 in place (`SQLiteStatement.bind`): every shape a Swift string
/// can have arrives whole, as TEXT, and an empty string stays '' (never NULL).
struct SQLiteBindingTests {
    @Test func everyShapeOfTextIsStoredWholeAsText() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let bridged = NSString(string: "bridged from Foundation, longer than fifteen bytes") as String
        let texts = [
            "", "a", "pending", "exactly15bytes!", "sixteen bytes!!!", "c:1 f:2 d:3", "nul\u{0}inside",
            "ünïcødé 🚚", String(repeating: "x", count: 5_000), bridged, String("a substring, copied"[...]),
        ]
        for text in texts {
            let row = try db.queryFirst("SELECT ?1, typeof(?1), length(CAST(?1 AS BLOB))", [.text(text)]) {
                (value: $0.text(0), type: $0.text(1), bytes: $0.int(2))
            }
            #expect(row?.type == "text", "\(text.prefix(20))")
            #expect(row?.bytes == text.utf8.count, "\(text.prefix(20))")
            #expect(row?.value == text, "\(text.prefix(20))")
        }
    }
}

/// `waybill_lower` (the text search's case folding) answers what `OrderQuery.fold` does for every
/// text, through its ASCII shortcut (copied back unchanged, or lowered byte by byte) or Swift's
/// Unicode mapping; NULL stays NULL.
struct SQLiteLowerTests {
    @Test func theASCIIShortcutLowersExactlyAsSwiftDoes() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        // Every ASCII byte, then the letters' neighbours on their own, then the other paths.
        let everyASCII = String(decoding: (1...0x7F).map { UInt8($0) }, as: UTF8.self)
        let texts = [
            "", "plain load", "2026/11/0042", "Plain LOAD 42", "@[`{", "AZ", "az", everyASCII,
            "nul\u{0}INSIDE", "ÉCOLE Müller", "ΟΔΟΣ", "İstanbul", "MiXeD ü", String(repeating: "AbC", count: 2_000),
        ]
        for text in texts {
            let lowered = try db.queryFirst("SELECT waybill_lower(?)", [.text(text)]) { $0.text(0) }
            #expect(lowered == OrderQuery.fold(text), "\(text.prefix(20))")
        }
        #expect(try db.queryFirst("SELECT waybill_lower(NULL) IS NULL", []) { $0.int(0) } == 1)
        func shape(_ text: String) -> SQLiteConnection.ASCIICase {
            Array(text.utf8).withUnsafeBufferPointer { SQLiteConnection.asciiCase($0) }
        }
        #expect(shape("2026/11/0042 plain") == .lowerASCII)
        #expect(shape("@[`{") == .lowerASCII)
        #expect(shape("Plain") == .upperASCII)
        #expect(shape("plain é") == .other)
    }
}

/// The statement cache finds a statement by where its text's bytes are, then checks the text
/// (`SQLiteConnection.cachedStatement`): texts built at run time, freed and built again, get their
/// own statements, and only the text each statement was prepared from has an address entered, so
/// the table grows with the statements, not with the calls.
struct SQLiteStatementCacheTests {
    @Test func textsBuiltAtRunTimeGetTheirOwnStatementsAndOneAddressEach() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        func text(_ value: Int) -> String { "SELECT \(100_000 + value) - 100000 AS built_at_run_time" }
        func address(_ text: String) -> UInt? { text.utf8.withContiguousStorageIfAvailable { UInt(bitPattern: $0.baseAddress) } }
        // Texts of one length, built and dropped one after another: malloc hands the next text a
        // freed copy's block more often than not.
        var reused = 0
        var freedCopy: UInt?
        for value in 0..<300 {
            let sql = text(value)
            if let freedCopy, address(sql) == freedCopy { reused += 1 }
            #expect(try db.queryFirst(sql) { $0.int(0) } == value)
            let copy = text(value)  // the same text elsewhere: found by text
            freedCopy = address(copy)
            #expect(try db.queryFirst(copy) { $0.int(0) } == value)
        }
        #expect(reused > 0, "no address was reused: the case this test is about did not happen")
        for _ in 0..<3 { #expect(try db.queryFirst("SELECT 41 + 1 AS the_answer_from_a_literal") { $0.int(0) } == 42) }
        let counts = db.statementCacheCounts
        #expect(counts.statements == 301)
        #expect(counts.addresses == 301, "one address per statement, none for the copies")
    }

    /// SQLite's memory statistics are off in a process whose first database a `SQLiteConnection`
    /// opened (`SQLiteConnection.configureProcess`): each of its allocations then skips a global
    /// mutex. Nothing in this process opens SQLite any other way.
    @Test func sqliteKeepsNoMemoryStatistics() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        #expect(!SQLiteConnection.keepsMemoryStatistics)
    }

    /// Texts are copied into bytes the statement keeps and bound in place (`SQLITE_STATIC`): one
    /// statement used again and again, with texts of every length, reads back each use's own
    /// texts, also when they are too large for its kept bytes, which stay within their limit.
    @Test func aStatementUsedAgainReadsBackEachUsesOwnTexts() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let sql = "SELECT ?1, ?2, ?3, typeof(?2), ?4"
        let large = String(repeating: "y", count: SQLiteStatement.arenaLimit + 1)
        let uses: [[String]] = [
            ["a", "bb", "ccc"], ["a longer text than before", "", "x"], [large, "z", "w"], ["1", "2", "3"],
            ["", "", ""], [String(repeating: "é", count: 3_000), "nul\u{0}inside", "🚚"], ["p", "q", "r"],
            // Grown past 12 000 bytes by then, and asked for 13 000: doubling would pass the limit.
            [String(repeating: "m", count: 9_000), "", ""], [String(repeating: "n", count: 13_000), "o", ""],
        ]
        for texts in uses {
            let row = try db.queryFirst(sql, texts.map { .text($0) } + [.integer(7)]) {
                (texts: [$0.text(0), $0.text(1), $0.text(2)], type: $0.text(3), number: $0.int(4))
            }
            #expect(row?.texts == texts, "\(texts.map { $0.prefix(12) })")
            #expect(row?.type == "text")
            #expect(row?.number == 7)
            let kept = try #require(db.arenaBytes(of: sql))
            #expect(kept <= SQLiteStatement.arenaLimit)
            let total = texts.reduce(0) { $0 + $1.utf8.count }
            if total <= SQLiteStatement.arenaLimit { #expect(kept >= total) }
        }
        // Fewer values after a longer use: the parameters not listed read back as NULL, not as
        // the last use's texts still in the kept bytes.
        let fewer = try db.queryFirst(sql, [.text("only one")]) {
            (first: $0.text(0), second: $0.optionalText(1), fourth: $0.optionalInt64(4))
        }
        #expect(fewer?.first == "only one")
        #expect(fewer?.second == nil)
        #expect(fewer?.fourth == nil)
    }

    /// A row closure that runs the same SQL again gets a statement of its own: both runs read their
    /// own texts, and the outer one goes on where it was (rebinding the running statement would
    /// have reset it and rewritten the bytes its texts are read from).
    @Test func theSameSQLRunInsideItsOwnRowsRunsOnAStatementOfItsOwn() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let sql = "SELECT ?1 UNION ALL SELECT ?1 || 'b'"
        var inner: [[String]] = []
        let rows = try db.query(sql, [.text("a")]) { row throws(SQLiteError) -> String in
            let outer = row.text(0)
            inner.append(try db.query(sql, [.text("x")]) { $0.text(0) })
            return outer + "=" + row.text(0)
        }
        #expect(rows == ["a=a", "ab=ab"])
        #expect(inner == [["x", "xb"], ["x", "xb"]])
        #expect(db.statementCacheCounts.statements >= 1)
    }

    /// An event's `groups` column: its groups' names, space-separated, written as bytes into one
    /// string (`Transaction.groupNames`); resume and pruning read it back by these names.
    @Test func anEventsGroupsColumnIsItsGroupsNamesSpaceSeparated() {
        typealias Transaction = SQLiteOrderStore.Transaction
        #expect(Transaction.groupNames([]) == "")
        #expect(Transaction.groupNames([.driver(UserID(7))]) == "driver_7")
        #expect(Transaction.groupNames([.company(CompanyID(1)), .fleet(CompanyID(1)), .driver(UserID(7))]) == "company_1 fleet_1 driver_7")
        let long: [Group] = [.company(CompanyID(.max)), .fleet(CompanyID(.min)), .driver(UserID(.max)), .driver(UserID(1))]
        #expect(Transaction.groupNames(long) == long.map(\.name).joined(separator: " "))
    }
}
