public import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where the offline queue lives between app launches (SPEC §5 rule 8: it survives a restart).
///
/// The session writes the whole queue after every change (it is a handful of actions) and reads it
/// when it is created, at `start()`, and again after each time it let the storage go; a new session
/// over the same storage resumes the queue. ``FileActionStorage`` is
/// the real one (Linux and iOS); ``InMemoryActionStorage`` serves tests and previews.
public protocol ActionStorage: Sendable {
    /// The bytes last written, or `nil` if nothing was ever written.
    func load() throws -> Data?
    /// Replaces what is stored with `data`, all or nothing: a crash mid-write leaves the old queue.
    func save(_ data: Data) throws
    /// Keeps what is stored somewhere the next ``save(_:)`` does not overwrite: the session found it
    /// unreadable (a newer app's format, a damaged file), and a driver's actions are not thrown away
    /// unseen. The default keeps nothing.
    /// - Throws: when it could not be kept aside; the session then never writes over it.
    func setAsideUnreadable() throws

    /// Makes the caller the storage's one user for as long as it keeps the returned claim (a session
    /// holds its claim while it runs, and a session that does not run only for one write: `queue`,
    /// `dismissRefusal`). `nil`: this storage needs none (memory).
    /// - Throws: ``ActionStorageInUse`` while another user holds it — another claim of this storage
    ///   or of a copy of it included: two users would each write their own copy of the queue over
    ///   the other's. To let a session use a claim of its caller's, pass it to the session.
    func claim() throws -> ActionStorageClaim?
}

extension ActionStorage {
    public func setAsideUnreadable() throws {}
    public func claim() throws -> ActionStorageClaim? { nil }
}

/// A storage's one user, for as long as this object lives (``ActionStorage/claim()``): whoever
/// holds a reference to it shares it (`DriverSession`'s `actionStorageClaim`).
public final class ActionStorageClaim: Sendable {
    private let release: @Sendable () -> Void
    /// Whether a session took it (`DriverSession`'s `actionStorageClaim`): a claim goes to one only.
    private let adopted = Atomic<Bool>(false)
    init(release: @escaping @Sendable () -> Void) { self.release = release }
    deinit { release() }

    /// Marks the claim as a session's; `false` if another session has it already.
    func adopt() -> Bool { !adopted.exchange(true, ordering: .sequentiallyConsistent) }

    /// The session that had it stopped (or was refused): another may be given it.
    func disown() { adopted.store(false, ordering: .sequentiallyConsistent) }
}

/// Another user holds the storage: a session of this app not released yet, or another process.
public struct ActionStorageInUse: Error, CustomStringConvertible {
    /// The lock file the other user holds.
    public let lockPath: String
    public var description: String {
        "the action queue is in use by another session or app (it holds \(lockPath)): stop that one first"
    }
}

/// The queue in one file, replaced atomically on every change: written to a temporary file, synced to
/// the disk, renamed over the old one, and the directory synced, so a power cut keeps either the old
/// queue or the new one, and an action the app was told is kept is still there after it.
///
/// Put it where the app keeps data that must survive (the app's Application Support directory on iOS,
/// `--state-dir` for `waybill driver`). One user at a time: a session claims the file (an exclusive
/// lock on `<file>.lock`) while it runs (or for one write when it does not), and a session over
/// another `FileActionStorage` of the same file (in this process or another) keeps no action until
/// that claim is released: each
/// session writes its whole queue, and two would write over each other's actions (found by a
/// review). Copies of one value are no exception: a claim is refused while a claim of a copy lives
/// (two sessions made over copies of one value wrote over each other's queue; found by a review).
public struct FileActionStorage: ActionStorage {
    /// The queue file.
    public let url: URL
    private let lock: FileLockOwner

    /// Storage in the file at `url`; its directory is created on the first save.
    public init(url: URL) {
        self.url = url
        lock = FileLockOwner(path: url.path + ".lock")
    }

    public func claim() throws -> ActionStorageClaim? { try lock.claim() }

    public func load() throws -> Data? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    public func save(_ data: Data) throws {
        let directory = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            try Self.writeSynced(data, to: temporary.path)
            guard rename(temporary.path, url.path) == 0 else { throw posixError() }
        } catch {
            unlink(temporary.path)
            throw error
        }
        // Without this the rename may be lost in a power cut (the file synced, its new name not):
        // `Data.write(options: .atomic)`, used before, syncs neither (found by a review).
        Self.sync(directory: directory.path)
    }

    /// Where ``setAsideUnreadable()`` moves an unreadable queue file: `<file>.unreadable`, or
    /// `<file>.unreadable.1`, `.2`, … when earlier ones are still there.
    public var unreadableURL: URL { url.appendingPathExtension("unreadable") }

    /// Renames the file to the first free name of ``unreadableURL``'s, for a person or a later
    /// version to look at. Earlier unreadable files are never replaced.
    /// - Throws: when the file cannot be moved (it then stays, and is never written over).
    public func setAsideUnreadable() throws {
        let files = FileManager.default
        guard files.fileExists(atPath: url.path) else { return }
        var target = unreadableURL
        var number = 0
        while files.fileExists(atPath: target.path) {
            number += 1
            guard number <= 1000 else { throw CocoaError(.fileWriteFileExists) }
            target = unreadableURL.appendingPathExtension(String(number))
        }
        try files.moveItem(at: url, to: target)
    }

    private static func writeSynced(_ data: Data, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw posixError() }
        defer { close(descriptor) }
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw posixError()
                }
                offset += written
            }
        }
        guard flushToDisk(descriptor) == 0 else { throw posixError() }
    }

    private static func sync(directory path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// `fsync`; on Apple platforms `F_FULLFSYNC`, since their `fsync` leaves the data in the drive's cache.
    private static func flushToDisk(_ descriptor: Int32) -> Int32 {
        #if canImport(Darwin)
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return 0 }
        #endif
        return fsync(descriptor)
    }

}

/// The error `errno` names now (EIO if it names none POSIX knows).
private func posixError() -> POSIXError { POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }

/// The exclusive `flock` behind a ``FileActionStorage``'s claims, held while its one claim lives.
/// `flock` locks belong to an open file, so a second value in the same process is refused like
/// another process; a copy of this value shares this owner, which refuses it itself.
final class FileLockOwner: Sendable {
    let path: String
    /// The locked file while a claim lives; -1 otherwise.
    private let descriptor = Mutex<Int32>(-1)

    init(path: String) { self.path = path }

    func claim() throws -> ActionStorageClaim {
        try descriptor.withLock { held throws in
            guard held < 0 else { throw ActionStorageInUse(lockPath: path) }
            let directory = (path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard opened >= 0 else { throw posixError() }
            guard flock(opened, LOCK_EX | LOCK_NB) == 0 else {
                let failure: any Error = errno == EWOULDBLOCK ? ActionStorageInUse(lockPath: path) : posixError()
                close(opened)
                throw failure
            }
            held = opened
        }
        return ActionStorageClaim { [self] in release() }
    }

    private func release() {
        descriptor.withLock { held in
            if held >= 0 { close(held) }  // releases the lock
            held = -1
        }
    }
}

/// The queue in memory: survives a new session on the same value, not a process exit. For tests.
public final class InMemoryActionStorage: ActionStorage {
    private let stored = Mutex<Data?>(nil)
    private let failing = Mutex(false)

    /// Empty storage.
    public init() {}

    public func load() throws -> Data? { stored.withLock { $0 } }

    public func save(_ data: Data) throws {
        if failing.withLock({ $0 }) { throw CocoaError(.fileWriteOutOfSpace) }
        stored.withLock { $0 = data }
    }

    /// Makes every ``save(_:)`` fail (a full disk), to test that an action that cannot be kept is not accepted.
    public func failSaves(_ fail: Bool) { failing.withLock { $0 = fail } }
}

/// The stored form: `{"format":1,"actions":[…]}`, so a later app version can read (or migrate) it.
/// Refusals the driver has not dismissed yet are kept too (`"refused":[{"action":{…},"status":409,
/// "code":…,"message":…}]`, absent when there are none and in files of earlier versions, which
/// read this format as theirs): an app killed after a refusal in the background, or one that
/// expires an action at launch, still shows it next time (SPEC §5 rule 8; found by a review,
/// 2026-12-04).
struct StoredActionQueue: Codable {
    var format = 1
    var actions: [QueuedAction]
    var refused: [StoredRefusal]?

    struct StoredRefusal: Codable {
        var action: QueuedAction
        var status: Int?
        var code: String
        var message: String
    }

    static func decode(_ data: Data) throws -> [QueuedAction] { try read(data).actions }

    /// The queued actions and the refusals not yet dismissed (each with its `refused` state).
    static func read(_ data: Data) throws -> (actions: [QueuedAction], refused: [QueuedAction]) {
        let stored = try WireJSON.decoder().decode(StoredActionQueue.self, from: data)
        guard stored.format == 1 else { throw WaybillClientError.badResponse("queue format \(stored.format)") }
        let refused = (stored.refused ?? []).map { entry in
            var action = entry.action
            action.state = .refused(ActionRefusal(status: entry.status, code: entry.code, message: entry.message))
            return action
        }
        return (stored.actions, refused)
    }

    static func encode(_ actions: [QueuedAction], refused: [QueuedAction] = []) throws -> Data {
        let entries = refused.compactMap { action -> StoredRefusal? in
            guard case .refused(let reason) = action.state else { return nil }
            return StoredRefusal(action: action, status: reason.status, code: reason.code, message: reason.message)
        }
        return try WireJSON.encoder().encode(StoredActionQueue(actions: actions, refused: entries.isEmpty ? nil : entries))
    }
}
