internal import CSQLite

/// A VFS in front of SQLite's default one that hands each commit's WAL bytes to the kernel in one
/// `pwrite`, not two per page.
///
/// Why: SQLite writes every WAL frame as two `pwrite` calls, its 24-byte header and then its page,
/// so an order write (about 5 pages: the order, the event, the event's group rows) made about 11.6
/// `pwrite` calls, each paying a system call, the file's lock and its time stamps (measured at
/// 1 000 writes/s: 5.8 % of the server's samples; docs/BENCHMARKS.md, 2026-12-06 12:54–).
///
/// How: writes to a WAL file are gathered in a buffer while they run on from each other, and go
/// to the file in one call
/// - when the frame that commits a transaction has been written: its header says so (bytes 4–7,
///   the database's size after the commit, are not zero; a format SQLite documents and keeps).
///   So by the time SQLite publishes the commit to other connections (in shared memory, after its
///   last write returns), every byte of it is in the file, as before;
/// - before anything else touches the file through this handle: a read (SQLite reads back frames a
///   transaction spilled or wrote earlier), a sync, a truncate, its size, a file control, a close;
/// - when the next write is not right after the gathered bytes (SQLite rewrites a frame in place),
///   or would not fit (the buffer keeps at most `capacity` bytes; a larger write goes straight on).
///
/// Nothing else changes: the other files (the database, its shared memory) are SQLite's own, and
/// a failed gathered write is reported by the call that made it go out (a commit fails, and
/// SQLite rolls back). Frames not yet written were never visible to anyone: SQLite publishes only
/// committed frames. A process that dies with bytes still gathered had not committed them.
///
/// The VFS is registered once per process under `name` (not as the default), and every
/// `SQLiteConnection` opens through it; if registering fails, connections use the default VFS.
enum WALGathering {
    static let name = "waybill-wal-gathering"

    /// The VFS's name once it is registered; nil if it could not be (connections then open with
    /// SQLite's default VFS, and write as SQLite does).
    static let registeredName: String? = register() ? name : nil

    /// Where the real file lies inside the `sqlite3_file` this VFS hands out for a WAL file:
    /// after the methods pointer and the buffer's reference.
    private static let realFileOffset = 16

    nonisolated(unsafe) private static var base: UnsafeMutablePointer<sqlite3_vfs>?
    nonisolated(unsafe) private static var methods: UnsafeMutablePointer<sqlite3_io_methods>?

    private static func register() -> Bool {
        guard let base = sqlite3_vfs_find(nil), base.pointee.iVersion >= 1 else { return false }
        Self.base = base
        methods = makeIOMethods()
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

    private static func open(
        _ name: sqlite3_filename?, _ file: UnsafeMutablePointer<sqlite3_file>?, _ flags: Int32,
        _ outFlags: UnsafeMutablePointer<Int32>?
    ) -> Int32 {
        guard let base, let file, let baseOpen = base.pointee.xOpen else { return SQLITE_MISUSE }
        // Every other file is the default VFS's own, in place: this VFS never sees its calls.
        guard flags & SQLITE_OPEN_WAL != 0 else { return baseOpen(base, name, file, flags, outFlags) }
        let real = realFile(file)
        real.pointee.pMethods = nil
        let code = baseOpen(base, name, real, flags, outFlags)
        guard code == SQLITE_OK, real.pointee.pMethods != nil, let methods else {
            file.pointee.pMethods = nil  // SQLite calls no xClose for a file whose open failed
            return code == SQLITE_OK ? SQLITE_CANTOPEN : code
        }
        let buffer = WALGatherBuffer(capacity: WALGatherBuffer.defaultCapacity)
        UnsafeMutableRawPointer(file).advanced(by: 8)
            .storeBytes(of: Unmanaged.passRetained(buffer).toOpaque(), as: UnsafeMutableRawPointer.self)
        file.pointee.pMethods = UnsafePointer(methods)
        return SQLITE_OK
    }

    /// The buffer of a WAL file this VFS opened; nil for any other file (tests, statistics).
    static func buffer(of file: UnsafeMutablePointer<sqlite3_file>) -> WALGatherBuffer? {
        guard let methods, file.pointee.pMethods == UnsafePointer(methods) else { return nil }
        return bufferUnchecked(file)
    }

    private static func bufferUnchecked(_ file: UnsafeMutablePointer<sqlite3_file>?) -> WALGatherBuffer {
        let raw = UnsafeMutableRawPointer(file!).advanced(by: 8).load(as: UnsafeMutableRawPointer.self)
        return Unmanaged<WALGatherBuffer>.fromOpaque(raw).takeUnretainedValue()
    }

    private static func realFile(_ file: UnsafeMutablePointer<sqlite3_file>?) -> UnsafeMutablePointer<sqlite3_file> {
        UnsafeMutableRawPointer(file!).advanced(by: realFileOffset).assumingMemoryBound(to: sqlite3_file.self)
    }

    /// The real file's methods (set by the default VFS's open, never changed after).
    private static func real(_ file: UnsafeMutablePointer<sqlite3_file>?) -> (UnsafeMutablePointer<sqlite3_file>, UnsafePointer<sqlite3_io_methods>) {
        let real = realFile(file)
        return (real, real.pointee.pMethods!)
    }

    /// Writes out what `file` gathered, then answers `SQLITE_OK` or the write's error.
    private static func flush(_ file: UnsafeMutablePointer<sqlite3_file>?) -> Int32 {
        let buffer = bufferUnchecked(file)
        guard buffer.count > 0 else { return SQLITE_OK }
        let (real, methods) = self.real(file)
        return buffer.flush { bytes, count, offset in methods.pointee.xWrite(real, bytes, count, offset) }
    }

    /// One set of methods for every WAL file, built when the VFS is registered: every call but a
    /// write first writes out what was gathered, then goes to the real file. Version 3, the
    /// default VFS's; a method the real file lacks answers as SQLite's own stubs would.
    private static func makeIOMethods() -> UnsafeMutablePointer<sqlite3_io_methods> {
        var m = sqlite3_io_methods()
        m.iVersion = 3
        m.xClose = { file in
            let flushed = WALGathering.flush(file)
            let (real, methods) = WALGathering.real(file)
            let closed = methods.pointee.xClose(real)
            let raw = UnsafeMutableRawPointer(file!).advanced(by: 8).load(as: UnsafeMutableRawPointer.self)
            Unmanaged<WALGatherBuffer>.fromOpaque(raw).release()
            file!.pointee.pMethods = nil
            return flushed != SQLITE_OK ? flushed : closed
        }
        m.xRead = { file, bytes, count, offset in
            let flushed = WALGathering.flush(file)
            guard flushed == SQLITE_OK else { return flushed }
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xRead(real, bytes, count, offset)
        }
        m.xWrite = { file, bytes, count, offset in
            guard let bytes, count >= 0 else { return SQLITE_MISUSE }
            let buffer = WALGathering.bufferUnchecked(file)
            let (real, methods) = WALGathering.real(file)
            return buffer.write(bytes, Int(count), at: offset) { bytes, count, offset in
                methods.pointee.xWrite(real, bytes, count, offset)
            }
        }
        m.xTruncate = { file, size in
            let flushed = WALGathering.flush(file)
            guard flushed == SQLITE_OK else { return flushed }
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xTruncate(real, size)
        }
        m.xSync = { file, flags in
            let flushed = WALGathering.flush(file)
            guard flushed == SQLITE_OK else { return flushed }
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xSync(real, flags)
        }
        m.xFileSize = { file, size in
            let flushed = WALGathering.flush(file)
            guard flushed == SQLITE_OK else { return flushed }
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xFileSize(real, size)
        }
        m.xLock = { file, level in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xLock(real, level)
        }
        m.xUnlock = { file, level in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xUnlock(real, level)
        }
        m.xCheckReservedLock = { file, result in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xCheckReservedLock(real, result)
        }
        m.xFileControl = { file, op, argument in
            let flushed = WALGathering.flush(file)
            guard flushed == SQLITE_OK else { return flushed }
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xFileControl(real, op, argument)
        }
        m.xSectorSize = { file in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xSectorSize(real)
        }
        m.xDeviceCharacteristics = { file in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xDeviceCharacteristics(real)
        }
        // Shared memory and memory maps belong to the database file, never to its WAL; forwarded
        // all the same, as the default VFS's version promises them.
        m.xShmMap = { file, region, size, extend, pointer in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xShmMap?(real, region, size, extend, pointer) ?? SQLITE_IOERR
        }
        m.xShmLock = { file, offset, count, flags in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xShmLock?(real, offset, count, flags) ?? SQLITE_IOERR
        }
        m.xShmBarrier = { file in
            let (real, methods) = WALGathering.real(file)
            methods.pointee.xShmBarrier?(real)
        }
        m.xShmUnmap = { file, delete in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xShmUnmap?(real, delete) ?? SQLITE_OK
        }
        m.xFetch = { file, offset, count, pointer in
            let flushed = WALGathering.flush(file)
            guard flushed == SQLITE_OK else { return flushed }
            let (real, methods) = WALGathering.real(file)
            guard let fetch = methods.pointee.xFetch else { pointer?.pointee = nil; return SQLITE_OK }
            return fetch(real, offset, count, pointer)
        }
        m.xUnfetch = { file, offset, pointer in
            let (real, methods) = WALGathering.real(file)
            return methods.pointee.xUnfetch?(real, offset, pointer) ?? SQLITE_OK
        }
        let stored = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        stored.initialize(to: m)
        return stored
    }
}

/// The bytes one WAL file has gathered but not yet written, and counts of what it did (tests).
///
/// Used by one connection at a time (SQLite's rule for a file handle), so not locked.
final class WALGatherBuffer {
    /// 30 frames of 4 KiB pages, allocated at the first write: a commit of more pages goes out in
    /// several writes of this size (a seed, a migration), still far fewer than two per page.
    static let defaultCapacity = 30 * (4096 + 24)
    /// The most one write may hand the default VFS: it keeps only the low 17 bits of a write's
    /// length (`seekAndWriteFd`; SQLite itself never writes more than a 64 KiB page and its
    /// header), so 256 KiB went out as 0 bytes and read as a full disk (found by a test).
    static let largestWrite = 0x1FFFF
    /// The size of a frame's header (the WAL format).
    static let frameHeaderSize = 24

    let capacity: Int
    private var storage: UnsafeMutableRawPointer?
    /// Bytes gathered, for the file from `start` on.
    private(set) var count = 0
    private var start: Int64 = 0
    /// The last header gathered was a commit frame's: its page, next, ends the transaction.
    private var commitPending = false

    /// Writes SQLite made to this file, and writes this buffer made to the file system.
    private(set) var writesTaken = 0
    private(set) var writesMade = 0

    init(capacity: Int) { self.capacity = min(capacity, Self.largestWrite) }

    deinit { storage?.deallocate() }

    typealias FileWrite = (UnsafeRawPointer, Int32, Int64) -> Int32

    /// Takes one write of SQLite's: gathers it, or writes it out with what was gathered before.
    func write(_ bytes: UnsafeRawPointer, _ count: Int, at offset: Int64, to file: FileWrite) -> Int32 {
        writesTaken += 1
        if self.count > 0, offset != start + Int64(self.count) || self.count + count > capacity {
            let flushed = flush(to: file)
            guard flushed == SQLITE_OK else { return flushed }
        }
        guard count <= capacity else {
            commitPending = false
            writesMade += 1
            return file(bytes, Int32(count), offset)
        }
        if storage == nil { storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16) }
        if self.count == 0 { start = offset }
        (storage! + self.count).copyMemory(from: bytes, byteCount: count)
        self.count += count

        // The commit frame's header comes on its own, then its page; a write that holds both (a
        // header followed by a page) commits at once. A page is at least 512 bytes.
        // Sizes tell the two apart: a header is 24 bytes, a page a power of two from 512 (the WAL's
        // own header, 32 bytes at offset 0, is neither).
        guard offset >= 32 else { return SQLITE_OK }
        if count == Self.frameHeaderSize {
            commitPending = Self.isCommitHeader(bytes)
            return SQLITE_OK
        }
        let page = Self.isPageSize(count) ? count : count - Self.frameHeaderSize
        guard Self.isPageSize(page) else { return SQLITE_OK }
        if page == count ? commitPending : Self.isCommitHeader(bytes) { return flush(to: file) }
        commitPending = false
        return SQLITE_OK
    }

    /// Writes out everything gathered, in one call.
    func flush(to file: FileWrite) -> Int32 {
        commitPending = false
        guard count > 0, let storage else { return SQLITE_OK }
        let length = count
        count = 0  // on failure too: SQLite rolls the transaction back, and writes its frames again
        writesMade += 1
        return file(storage, Int32(length), start)
    }

    /// Whether a frame header's "database size after commit" (bytes 4–7) is not zero.
    private static func isCommitHeader(_ bytes: UnsafeRawPointer) -> Bool {
        bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self) != 0  // in any byte order
    }

    private static func isPageSize(_ count: Int) -> Bool {
        count >= 512 && count <= 65536 && count & (count - 1) == 0
    }
}
