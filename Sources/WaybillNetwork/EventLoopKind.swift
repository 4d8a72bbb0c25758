import CWebSockets
import Foundation

/// What a lws service thread waits on.
///
/// `poll` is lws's built-in loop: every wake-up `poll()`s every socket, so its cost per message grows
/// with the number of open sockets (≈ 1 ms of CPU per inbound message at 10 000 sockets here).
/// `libev` hands lws a libev loop of ours (epoll underneath), whose cost per message does not depend on
/// the socket count. See docs/BENCHMARKS.md and the shared libwebsockets field notes (../shared/notes/libwebsockets.md, §13).
public enum EventLoopKind: String, Sendable, CaseIterable {
    /// lws's own `poll()` loop (no plugin needed).
    case poll
    /// lws's libev plugin on a foreign loop created by Waybill (needs `libwebsockets-evlib-ev`).
    case libev

    /// The environment variable that picks the server's loop when the configuration does not.
    public static let environmentVariable = "WAYBILL_EVENT_LOOP"

    /// The kind named by `WAYBILL_EVENT_LOOP` in this process's environment, or `libev` when unset.
    /// - Throws: `HTTPServerError` for any other value, so a typo never silently picks a loop.
    public static func fromEnvironment() throws(HTTPServerError) -> EventLoopKind {
        try fromEnvironment(ProcessInfo.processInfo.environment)
    }

    /// The kind named by `WAYBILL_EVENT_LOOP` in `environment`, or `libev` when it is unset or empty.
    /// - Throws: `HTTPServerError` for any other value, so a typo never silently picks a loop.
    public static func fromEnvironment(_ environment: [String: String]) throws(HTTPServerError) -> EventLoopKind {
        guard let raw = environment[environmentVariable], !raw.isEmpty else { return .libev }
        guard let kind = EventLoopKind(rawValue: raw.lowercased()) else {
            throw HTTPServerError(description: "\(environmentVariable) must be poll or libev, not \"\(raw)\"")
        }
        return kind
    }

    /// The file lws `dlopen`s for this loop (it only looks in its compiled-in library directory), if any.
    static var pluginPath: String { LWS_INSTALL_LIBDIR + "/libwebsockets-evlib_ev.so" }

    /// Fails with one clear line when lws could not load the loop: lws itself only returns NULL from
    /// `lws_create_context` (and logs "unable to load evlib plugin"). There is deliberately no fallback
    /// to `poll`: at 15 000 sockets that would be a 30× CPU regression behind a warning nobody reads.
    func checkAvailable(pluginPath: String = Self.pluginPath) throws(HTTPServerError) {
        guard self == .libev else { return }
        guard FileManager.default.fileExists(atPath: pluginPath) else {
            throw HTTPServerError(
                description: "the libev event loop needs the libwebsockets-evlib-ev package (\(pluginPath) "
                    + "is missing); install it or set \(Self.environmentVariable)=poll")
        }
    }
}
