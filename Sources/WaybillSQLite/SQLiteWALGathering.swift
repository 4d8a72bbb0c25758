internal import CSQLite

/// A VFS in front of SQLite's default one that hands each commit's WAL bytes to the kernel in one
/// `pwrite`, not two per page.
///
/// Why: SQLite writes every WAL frame as two `pwrite` calls, its 24-byte header and then its page,
/// so an order write (about 5 pages: the order, the event, the event's group rows) made about 11.6
/// `pwrite` calls, each paying a system call, the file's lock and its time stamps (measured at
/// 1 000 writes/s: 5.8 % of the server's samples; docs/BENCHMARKS.md, 2026-12-06 12:54–).
///
/// The rule SQLite's WAL rests on, kept: **every byte a writer puts in the WAL is in the file
/// before the writer publishes its commit and before it lets go of the WAL's write lock.**
/// Appended frames are gathered in a buffer while they run on from each other, and go to the file
/// in one call
/// - when the frame that commits a transaction has been written: its header says so (bytes 4–7,
///   the database's size after the commit, are not zero; the WAL format SQLite documents). SQLite
///   publishes a commit (in shared memory) only after that last write returns;
/// - when the write lock is let go (seen on the database file, which this VFS also wraps): what is
///   left then is a rolled-back transaction's frames, which SQLite would have written itself;
/// - before any other call on the WAL through this handle (a read of a frame the transaction
///   spilled, a sync, a truncate, its size, a file control);
/// - when a write does not follow on, or would not fit (`WALGatherBuffer.capacity`).
///
/// Everything that is not an appended frame goes straight to the file, after what was gathered:
/// a write before the furthest byte this handle wrote since it took the write lock (SQLite
/// rewriting a spilled page in place, or correcting the checksums in the headers of a committed
/// transaction's frames after its commit frame, `walRewriteChecksums`), a write of any size other
/// than a frame's header, a page, or both, and every write after a sync inside the transaction (a
/// new WAL's header; under `synchronous=FULL`, each commit's end, where SQLite may split a frame
/// into pieces of any size).
///
/// Errors: a gathered write that fails is reported by the call that sent it. From a write, as the
/// default VFS reports it (the commit fails, SQLite rolls back). From any other call, as
/// `SQLITE_IOERR_WRITE`: SQLite then rolls back the whole transaction (a full disk reported by a
/// read would roll back only the statement, and the transaction would go on without those bytes).
/// The bytes are dropped either way, and every later write of that transaction fails, so nothing
/// commits over the hole even if a caller swallowed the error. Sending the gathered bytes at the
/// lock's release cannot fail a committed transaction: a commit's bytes went out before it was
/// published; what is left then is a rolled-back transaction's.
///
/// Two reviews traced this against SQLite 3.40.1's `wal.c`, `pager.c` and `os_unix.c`
/// (docs/HARDENING.md, 2026-12-06 12:54–). It assumes SQLite's default VFS is `unix` (its io
/// methods' version 3).
///
/// The VFS is registered once per process under `name` (not as the default), and every
/// `SQLiteConnection` opens through it; if registering fails, connections use the default VFS. A
/// WAL is gathered only when its database file was opened through this VFS too (otherwise the
/// lock's release could not be seen); any other file is the default VFS's own, in place.
enum WALGathering {
    static let name = "waybill-wal-gathering"

    /// The VFS's name once it is registered; nil if it could not be (connections then open with
    /// SQLite's default VFS, and write as SQLite does).
    static let registeredName: String? = register() ? name : nil

    /// A wrapped file's layout: SQLite's `sqlite3_file` (the methods pointer), then this VFS's
    /// context (a retained `WALGatherBuffer` or `DatabaseLink`), then the real file.
    private static let contextOffset = 8
    private static let realFileOffset = 16

    /// The WAL's write lock: the first of the shared-memory locks (`WAL_WRITE_LOCK`, wal.c).
    private static let writeLockSlot: Int32 = 0

    nonisolated(unsafe) private static var base: UnsafeMutablePointer<sqlite3_vfs>?
    nonisolated(unsafe) private static var walMethods: UnsafeMutablePointer<sqlite3_io_methods>?
    nonisolated(unsafe) private static var databaseMethods: UnsafeMutablePointer<sqlite3_io_methods>?

    private static func register() -> Bool {
        guard let base = sqlite3_vfs_find(nil), base.pointee.iVersion >= 1 else { return false }
        Self.base = base
        walMethods = store(makeWALMethods())
        databaseMethods = store(makeDatabaseMethods())
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: base.pointee)
        vfs.pointee.pNext = nil
        let cName = Array(name.utf8CString)
        let zName = UnsafeMutablePointer<CChar>.allocate(capacity: cName.count)
        zName.initialize(from: cName, count: cName.count)
        vfs.pointee.zName = UnsafePointer(zName)
        vfs.pointee.szOsFile = Int32(realFileOffset) + base.pointee.szOsFile
        vfs.pointee.xOpen = { _, name, file, flags, outFlags in WALGathering.open(name, file, flags, outFlags) }
        // Never freed: SQLite keeps a registered VFS for the life of the process.
        return sqlite3_vfs_register(vfs, 0) == SQLITE_OK
    }

    private static func store(_ methods: sqlite3_io_methods) -> UnsafeMutablePointer<sqlite3_io_methods> {
        let stored = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        stored.initialize(to: methods)
        return stored
    }

    private static func open(
        _ name: sqlite3_filename?, _ file: UnsafeMutablePointer<sqlite3_file>?, _ flags: Int32,
        _ outFlags: UnsafeMutablePointer<Int32>?
    ) -> Int32 {
        guard let base, let file, let baseOpen = base.pointee.xOpen else { return SQLITE_MISUSE }
        let isDatabase = flags & SQLITE_OPEN_MAIN_DB != 0
        var database: UnsafeMutablePointer<sqlite3_file>?
        if flags & SQLITE_OPEN_WAL != 0, let name, let owner = sqlite3_database_file_object(name),
            owner.pointee.pMethods == UnsafePointer(databaseMethods)
        {
            database = owner
        }
        guard isDatabase || database != nil else { return baseOpen(base, name, file, flags, outFlags) }

        let real = realFile(file)
        real.pointee.pMethods = nil
        let code = baseOpen(base, name, real, flags, outFlags)
        guard code == SQLITE_OK, real.pointee.pMethods != nil else {
            // SQLite closes only a file whose methods are set; the real file's own open cleans up
            // after itself when it fails (the default VFS sets its methods only on success).
            file.pointee.pMethods = nil
            return code == SQLITE_OK ? SQLITE_CANTOPEN : code
        }
        if let database {
            let buffer = WALGatherBuffer(capacity: WALGatherBuffer.defaultCapacity)
            let link = Self.link(of: database)
            link.wal = file
            buffer.database = link
            setContext(file, Unmanaged.passRetained(buffer).toOpaque())
            file.pointee.pMethods = UnsafePointer(walMethods)
        } else {
            setContext(file, Unmanaged.passRetained(DatabaseLink()).toOpaque())
            file.pointee.pMethods = UnsafePointer(databaseMethods)
        }
        return SQLITE_OK
    }

    /// The buffer of a WAL file this VFS gathers for; nil for any other file (tests, statistics).
    static func buffer(of file: UnsafeMutablePointer<sqlite3_file>) -> WALGatherBuffer? {
        guard let walMethods, file.pointee.pMethods == UnsafePointer(walMethods) else { return nil }
        return bufferUnchecked(file)
    }

    private static func setContext(_ file: UnsafeMutablePointer<sqlite3_file>, _ context: UnsafeMutableRawPointer) {
        UnsafeMutableRawPointer(file).advanced(by: contextOffset).storeBytes(of: context, as: UnsafeMutableRawPointer.self)
    }

    private static func context(_ file: UnsafeMutablePointer<sqlite3_file>?) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(file!).advanced(by: contextOffset).load(as: UnsafeMutableRawPointer.self)
    }

    private static func bufferUnchecked(_ file: UnsafeMutablePointer<sqlite3_file>?) -> WALGatherBuffer {
        Unmanaged<WALGatherBuffer>.fromOpaque(context(file)).takeUnretainedValue()
    }

    private static func link(of database: UnsafeMutablePointer<sqlite3_file>?) -> DatabaseLink {
        Unmanaged<DatabaseLink>.fromOpaque(context(database)).takeUnretainedValue()
    }

    private static func realFile(_ file: UnsafeMutablePointer<sqlite3_file>?) -> UnsafeMutablePointer<sqlite3_file> {
        UnsafeMutableRawPointer(file!).advanced(by: realFileOffset).assumingMemoryBound(to: sqlite3_file.self)
    }

    /// Writes out what the WAL `file` gathered; `SQLITE_OK` or the write's error.
    private static func flush(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Int32 {
        let buffer = bufferUnchecked(file)
        guard buffer.count > 0 else { return SQLITE_OK }
        return forward(file) { real, methods in buffer.flush { methods.pointee.xWrite(real, $0, $1, $2) } }
    }

    /// `flush` before a call that is not a write: a failure is reported as a failed write (see the
    /// type's documentation).
    private static func flushBeforeCall(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Int32 {
        failureBeforeCall(flush(file))
    }

    /// What a call other than a write answers when sending the gathered bytes answered `code`:
    /// an I/O error as it is, anything else (a full disk) as `SQLITE_IOERR_WRITE`.
    static func failureBeforeCall(_ code: Int32) -> Int32 {
        code == SQLITE_OK || code & 0xFF == SQLITE_IOERR ? code : wb_sqlite_ioerr_write
    }

    /// Runs `body` with the real file and its methods (a C function cannot capture, so each
    /// method below is a closure of its own that hands its arguments on through this).
    private static func forward(
        _ file: UnsafeMutablePointer<sqlite3_file>?,
        _ body: (UnsafeMutablePointer<sqlite3_file>, UnsafePointer<sqlite3_io_methods>) -> Int32
    ) -> Int32 {
        let real = realFile(file)
        return body(real, real.pointee.pMethods!)
    }

    /// `forward`, after the WAL `file`'s gathered bytes went out (`flushBeforeCall`).
    private static func forwardAfterFlush(
        _ file: UnsafeMutablePointer<sqlite3_file>?,
        _ body: (UnsafeMutablePointer<sqlite3_file>, UnsafePointer<sqlite3_io_methods>) -> Int32
    ) -> Int32 {
        let flushed = flushBeforeCall(file)
        return flushed == SQLITE_OK ? forward(file, body) : flushed
    }

    /// Methods that hand every call to the real file; the two tables below replace a few. A method
    /// the real file's version lacks answers as SQLite does when a VFS has none.
    private static func forwardingMethods() -> sqlite3_io_methods {
        var m = sqlite3_io_methods()
        m.iVersion = 3
        m.xClose = { file in WALGathering.forward(file) { $1.pointee.xClose($0) } }
        m.xRead = { file, bytes, count, offset in WALGathering.forward(file) { $1.pointee.xRead($0, bytes, count, offset) } }
        m.xWrite = { file, bytes, count, offset in WALGathering.forward(file) { $1.pointee.xWrite($0, bytes, count, offset) } }
        m.xTruncate = { file, size in WALGathering.forward(file) { $1.pointee.xTruncate($0, size) } }
        m.xSync = { file, flags in WALGathering.forward(file) { $1.pointee.xSync($0, flags) } }
        m.xFileSize = { file, size in WALGathering.forward(file) { $1.pointee.xFileSize($0, size) } }
        m.xLock = { file, level in WALGathering.forward(file) { $1.pointee.xLock($0, level) } }
        m.xUnlock = { file, level in WALGathering.forward(file) { $1.pointee.xUnlock($0, level) } }
        m.xCheckReservedLock = { file, result in WALGathering.forward(file) { $1.pointee.xCheckReservedLock($0, result) } }
        m.xFileControl = { file, op, argument in WALGathering.forward(file) { $1.pointee.xFileControl($0, op, argument) } }
        m.xSectorSize = { file in WALGathering.forward(file) { $1.pointee.xSectorSize($0) } }
        m.xDeviceCharacteristics = { file in WALGathering.forward(file) { $1.pointee.xDeviceCharacteristics($0) } }
        m.xShmMap = { file, region, size, extend, pointer in
            WALGathering.forward(file) { $1.pointee.iVersion >= 2 ? $1.pointee.xShmMap($0, region, size, extend, pointer) : SQLITE_IOERR }
        }
        m.xShmLock = { file, offset, count, flags in
            WALGathering.forward(file) { $1.pointee.iVersion >= 2 ? $1.pointee.xShmLock($0, offset, count, flags) : SQLITE_IOERR }
        }
        m.xShmBarrier = { file in
            _ = WALGathering.forward(file) { real, methods in
                if methods.pointee.iVersion >= 2 { methods.pointee.xShmBarrier(real) }
                return SQLITE_OK
            }
        }
        m.xShmUnmap = { file, delete in WALGathering.forward(file) { $1.pointee.iVersion >= 2 ? $1.pointee.xShmUnmap($0, delete) : SQLITE_OK } }
        m.xFetch = { file, offset, count, pointer in WALGathering.fetch(file, offset, count, pointer) }
        m.xUnfetch = { file, offset, pointer in
            WALGathering.forward(file) { $1.pointee.iVersion >= 3 ? $1.pointee.xUnfetch($0, offset, pointer) : SQLITE_OK }
        }
        return m
    }

    private static func fetch(
        _ file: UnsafeMutablePointer<sqlite3_file>?, _ offset: sqlite3_int64, _ count: Int32,
        _ pointer: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    ) -> Int32 {
        forward(file) { real, methods in
            guard methods.pointee.iVersion >= 3 else {
                pointer?.pointee = nil
                return SQLITE_OK
            }
            return methods.pointee.xFetch(real, offset, count, pointer)
        }
    }

    /// The database file's: its WAL's gathered bytes go out before the WAL's write lock is let go,
    /// and its WAL starts a new transaction's account when the lock is taken.
    private static func makeDatabaseMethods() -> sqlite3_io_methods {
        var m = forwardingMethods()
        m.xClose = { file in
            let closed = WALGathering.forward(file) { $1.pointee.xClose($0) }
            Unmanaged<DatabaseLink>.fromOpaque(WALGathering.context(file)).release()
            file!.pointee.pMethods = nil
            return closed
        }
        // With `locking_mode=EXCLUSIVE` SQLite takes no shared-memory locks at all (never used
        // here): the database file's own lock is let go last, when that mode ends.
        m.xUnlock = { file, level in
            if let wal = WALGathering.link(of: file).wal { WALGathering.release(wal) }
            return WALGathering.forward(file) { $1.pointee.xUnlock($0, level) }
        }
        m.xShmLock = { file, offset, count, flags in
            let wal = WALGathering.link(of: file).wal
            let coversWriteLock = offset <= WALGathering.writeLockSlot && WALGathering.writeLockSlot < offset + count
            if coversWriteLock, flags & SQLITE_SHM_UNLOCK != 0, let wal { WALGathering.release(wal) }
            let code = WALGathering.forward(file) { $1.pointee.xShmLock($0, offset, count, flags) }
            if coversWriteLock, code == SQLITE_OK, flags & SQLITE_SHM_LOCK != 0, flags & SQLITE_SHM_EXCLUSIVE != 0, let wal {
                WALGathering.bufferUnchecked(wal).beginWriting()
            }
            return code
        }
        return m
    }

    /// The lock that covers the WAL's writes is about to be let go (still held here): what the WAL
    /// gathered goes out, and its transaction's account ends. What is left by then is a
    /// rolled-back transaction's frames (a commit's went out with its commit frame's page, before
    /// SQLite published it). SQLite ignores an unlock's answer, so a failure to write them changes
    /// nothing: no committed frame refers to them.
    private static func release(_ wal: UnsafeMutablePointer<sqlite3_file>) {
        let buffer = bufferUnchecked(wal)
        if buffer.count > 0 { buffer.flushesAtRelease += 1 }
        _ = flush(wal)
        buffer.endWriting()
    }

    /// The WAL's: every call but a write first writes out what was gathered.
    private static func makeWALMethods() -> sqlite3_io_methods {
        var m = forwardingMethods()
        m.xClose = { file in
            // Empty by now: the write lock, and the database file's lock, were let go before.
            let flushed = WALGathering.flushBeforeCall(file)
            let closed = WALGathering.forward(file) { $1.pointee.xClose($0) }
            let buffer = WALGathering.bufferUnchecked(file)
            buffer.database?.wal = nil
            buffer.database = nil
            Unmanaged<WALGatherBuffer>.fromOpaque(WALGathering.context(file)).release()
            file!.pointee.pMethods = nil
            return flushed != SQLITE_OK ? flushed : closed
        }
        m.xRead = { file, bytes, count, offset in
            WALGathering.forwardAfterFlush(file) { $1.pointee.xRead($0, bytes, count, offset) }
        }
        m.xWrite = { file, bytes, count, offset in
            guard let bytes, count >= 0 else { return SQLITE_MISUSE }
            let buffer = WALGathering.bufferUnchecked(file)
            return WALGathering.forward(file) { real, methods in
                buffer.write(bytes, Int(count), at: offset) { methods.pointee.xWrite(real, $0, $1, $2) }
            }
        }
        m.xTruncate = { file, size in WALGathering.forwardAfterFlush(file) { $1.pointee.xTruncate($0, size) } }
        m.xSync = { file, flags in
            WALGathering.forwardAfterFlush(file) { real, methods in
                WALGathering.bufferUnchecked(file).synced()
                return methods.pointee.xSync(real, flags)
            }
        }
        m.xFileSize = { file, size in WALGathering.forwardAfterFlush(file) { $1.pointee.xFileSize($0, size) } }
        m.xFileControl = { file, op, argument in
            WALGathering.forwardAfterFlush(file) { $1.pointee.xFileControl($0, op, argument) }
        }
        m.xFetch = { file, offset, count, pointer in
            let flushed = WALGathering.flushBeforeCall(file)
            return flushed == SQLITE_OK ? WALGathering.fetch(file, offset, count, pointer) : flushed
        }
        return m
    }
}

/// A database file's link to its open WAL (both belong to one connection, used by one thread at a
/// time).
final class DatabaseLink {
    var wal: UnsafeMutablePointer<sqlite3_file>?
}

/// The bytes one WAL file has gathered but not yet written, and counts of what it did (tests).
///
/// Used by one connection at a time (SQLite's rule for a file handle), so not locked.
final class WALGatherBuffer {
    /// 30 frames of 4 KiB pages, or 117 of the store's 1 KiB pages, allocated at the first write:
    /// a commit of more pages goes out in several writes of up to this size (a seed, a migration),
    /// still far fewer than two per page. A frame may be cut at its end: its header gathered, its
    /// page after a flush (`commitPending` survives that flush).
    static let defaultCapacity = 30 * (4096 + 24)
    /// The most one write may hand the default VFS: it keeps only the low 17 bits of a write's
    /// length (`seekAndWriteFd`; SQLite itself never writes more than a 64 KiB page and its
    /// header). A longer write then failed as a full disk (found by a test).
    static let largestWrite = 0x1FFFF
    /// The size of a frame's header, and of the WAL's own header (the WAL format).
    static let frameHeaderSize = 24
    static let walHeaderSize = 32

    let capacity: Int
    /// The database file's link, cleared when the WAL closes.
    var database: DatabaseLink?
    private var storage: UnsafeMutableRawPointer?
    /// Bytes gathered, for the file from `start` on.
    private(set) var count = 0
    private var start: Int64 = 0
    /// The last header written was a commit frame's: its page, next, ends the transaction. Only a
    /// frame's end (or a new write transaction) clears it, never a flush: a commit header gathered
    /// when its page no longer fits is followed by a flush, and its page must still go out at once.
    private var commitPending = false
    /// A sync came inside this write transaction: everything after it goes straight out. Under
    /// `synchronous=NORMAL` that is the sync of a new WAL's header; under `FULL` each commit ends
    /// with one, and SQLite may split a frame at the sync point into pieces of any size.
    private var straightThrough = false
    /// A gathered write failed and its bytes were dropped: every later write of this transaction
    /// fails too, so nothing can commit over the hole (a caller that swallowed the error).
    private var failed = false
    /// Where the furthest write this handle made since its connection took the write lock (or the
    /// WAL started over) ended; -1 for none. A write before it rewrites bytes already written.
    private var end: Int64 = -1

    /// Writes SQLite made to this file, and writes this buffer made to the file system.
    private(set) var writesTaken = 0
    private(set) var writesMade = 0
    /// Times the write lock was let go with bytes still gathered (a rolled-back transaction's).
    var flushesAtRelease = 0
    /// Tests only: the next flush of gathered bytes fails with this code instead of reaching the
    /// file, as the file system's refusal would (a full disk is `SQLITE_FULL` from the default
    /// VFS). The unit tests below the store hand `write` a failing file; this fails a commit of a
    /// whole store, through SQLite.
    var flushFault: Int32?

    init(capacity: Int) { self.capacity = min(capacity, Self.largestWrite) }

    deinit { storage?.deallocate() }

    typealias FileWrite = (UnsafeRawPointer, Int32, Int64) -> Int32

    /// The connection took the WAL's write lock: its frames start after whatever any writer left.
    func beginWriting() {
        end = -1
        commitPending = false
        straightThrough = false
        failed = false
    }

    /// The write lock (or the database file's lock) was let go, after what was gathered went out.
    func endWriting() {
        commitPending = false
        straightThrough = false
        failed = false
    }

    /// The file was synced (after what was gathered went out).
    func synced() { straightThrough = true }

    private enum Kind { case walHeader, frameHeader, page, frame, other }

    private static func kind(of count: Int, at offset: Int64) -> Kind {
        if offset == 0 { return count == walHeaderSize ? .walHeader : .other }
        if count == frameHeaderSize { return .frameHeader }
        if isPageSize(count) { return .page }
        if isPageSize(count - frameHeaderSize) { return .frame }
        return .other
    }

    /// Takes one write of SQLite's: gathers it, or writes it out after what was gathered before.
    func write(_ bytes: UnsafeRawPointer, _ count: Int, at offset: Int64, to file: FileWrite) -> Int32 {
        writesTaken += 1
        guard !failed else { return wb_sqlite_ioerr_write }
        let kind = Self.kind(of: count, at: offset)
        if kind == .walHeader { end = -1 }  // the WAL starts over
        let rewrite = end >= 0 && offset < end
        end = max(end, offset + Int64(count))

        if rewrite || straightThrough || kind == .other || count > capacity {
            let flushed = flush(to: file)
            guard flushed == SQLITE_OK else { return flushed }
            if kind == .frameHeader { commitPending = Self.isCommitHeader(bytes) } else { commitPending = false }
            writesMade += 1
            return file(bytes, Int32(count), offset)
        }
        if self.count > 0, offset != start + Int64(self.count) || self.count + count > capacity {
            let flushed = flush(to: file)
            guard flushed == SQLITE_OK else { return flushed }
        }
        if storage == nil { storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16) }
        if self.count == 0 { start = offset }
        (storage! + self.count).copyMemory(from: bytes, byteCount: count)
        self.count += count

        switch kind {
        case .frameHeader:
            commitPending = Self.isCommitHeader(bytes)
            return SQLITE_OK
        case .page:
            let commits = commitPending
            commitPending = false
            return commits ? flush(to: file) : SQLITE_OK
        case .frame:
            commitPending = false
            return Self.isCommitHeader(bytes) ? flush(to: file) : SQLITE_OK
        case .walHeader, .other:
            return SQLITE_OK
        }
    }

    /// Writes out everything gathered, in one call. On failure the bytes are dropped: the caller
    /// reports the error, SQLite rolls the transaction back, and until then every write fails.
    func flush(to file: FileWrite) -> Int32 {
        guard count > 0, let storage else { return SQLITE_OK }
        let length = count
        count = 0
        writesMade += 1
        let code: Int32
        if let fault = flushFault {
            flushFault = nil
            code = fault
        } else {
            code = file(storage, Int32(length), start)
        }
        if code != SQLITE_OK { failed = true }
        return code
    }

    /// Whether a frame header's "database size after commit" (bytes 4–7) is not zero.
    private static func isCommitHeader(_ bytes: UnsafeRawPointer) -> Bool {
        bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self) != 0  // in any byte order
    }

    private static func isPageSize(_ count: Int) -> Bool {
        count >= 512 && count <= 65536 && count & (count - 1) == 0
    }
}
