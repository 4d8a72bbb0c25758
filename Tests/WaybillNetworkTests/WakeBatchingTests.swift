import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

/// One fixed thread that runs closures the test hands it, one at a time: the server tells a
/// batching thread's posts apart by the thread, so they must come from the same one.
private final class FixedThread: Sendable {
    private let worker = WorkerThreads(name: "fixed", count: 1)

    /// Runs `body` on the thread and waits for it.
    func run(_ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        worker.submit {
            body()
            done.signal()
        }
        done.wait()
    }

    func stop() { worker.shutdown() }
}

/// A count that work on the service thread adds to and the test reads.
private final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add(_ n: Int) { count.add(n, ordering: .sequentiallyConsistent) }
    var value: Int { count.load(ordering: .sequentiallyConsistent) }
}

/// Sends requests for `/on-executor` to its executor, everything else to the pool.
private struct ExecutorChoosingResponder: HTTPResponder {
    let executor: CountingExecutor
    func respond(to request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 200, body: Array("ok".utf8)) }
    func executor(for request: HTTPRequest) -> (any TaskExecutor)? {
        request.path == "/on-executor" ? executor : nil
    }
}

/// `HTTPServer.beginPostingBatch` and its siblings: a batching thread's work wakes the service
/// thread once per burst — at a flush, when the thread ends a batch idle, or at the latest one
/// batch later; other threads' work, and the same thread's work outside a batch, is never held.
@Suite(.timeLimit(.minutes(1)))
struct WakeBatchingTests {
    /// Long enough for a wake-up that was wrongly sent to have run the work.
    private static let settle = Duration.milliseconds(150)

    /// Runs `body` with a started server whose self-wake at start has been used (a plain post has
    /// run, so it cannot run held work early), a fixed thread to post from, and a counter that
    /// work run on the service thread adds to.
    private static func withPoster(_ body: (HTTPServer, FixedThread, Counter) async throws -> Void) async throws {
        let poster = FixedThread()
        defer { poster.stop() }
        try await withServer { server in
            let started = Counter()
            server.execute { _ in started.add(1) }
            try #require(await eventually { started.value == 1 }, "the service thread runs plain posts")
            try await body(server, poster, Counter())
        }
    }

    @Test func workInsideABatchWaitsUntilTheThreadEndsItIdle() async throws {
        try await Self.withPoster { server, poster, ran in
            poster.run {
                server.beginPostingBatch()
                for _ in 0..<3 { server.execute { _ in ran.add(1) } }
            }
            try await Task.sleep(for: Self.settle)
            #expect(ran.value == 0, "held until the burst ends")
            poster.run { server.endPostingBatch(idle: true) }
            #expect(await eventually { ran.value == 3 })
        }
    }

    @Test func aFlushSendsTheHeldWorkBeforeTheThreadBlocks() async throws {
        try await Self.withPoster { server, poster, ran in
            poster.run {
                server.beginPostingBatch()
                server.execute { _ in ran.add(1) }
                server.flushPostingBatch()
            }
            #expect(await eventually { ran.value == 1 }, "without waiting for the batch to end")
            poster.run { server.endPostingBatch(idle: true) }
        }
    }

    @Test func aHeldWakeUpWaitsAtMostOneMoreBatch() async throws {
        try await Self.withPoster { server, poster, ran in
            poster.run {
                server.beginPostingBatch()
                server.execute { _ in ran.add(1) }
                server.endPostingBatch(idle: false)  // busy: the next batch may add to it
            }
            try await Task.sleep(for: Self.settle)
            #expect(ran.value == 0)
            poster.run {
                server.beginPostingBatch()
                server.endPostingBatch(idle: false)  // still busy, but it waited one batch
            }
            #expect(await eventually { ran.value == 1 })
        }
    }

    @Test func theSameThreadOutsideABatchWakesAtOnce() async throws {
        try await Self.withPoster { server, poster, ran in
            poster.run {
                server.beginPostingBatch()
                server.endPostingBatch(idle: true)
                server.execute { _ in ran.add(1) }  // after the batch
            }
            #expect(await eventually { ran.value == 1 })
        }
    }

    @Test func anotherThreadsWorkWakesAtOnceAndTakesTheHeldWorkAlong() async throws {
        try await Self.withPoster { server, poster, ran in
            poster.run {
                server.beginPostingBatch()
                server.execute { _ in ran.add(1) }
            }
            server.execute { _ in ran.add(10) }  // not the batching thread
            #expect(await eventually { ran.value == 11 })
            poster.run { server.endPostingBatch(idle: true) }
        }
    }

    /// Wake-ups are sent after the inbox's lock is released, so shutdown must wait for those still
    /// under way before it destroys the context: threads posting (and batching) all through a
    /// shutdown never crash the process, and every post the loop accepted runs exactly once.
    @Test func postsRacingAShutdownAreRunOnceOrRefused() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.maxQueuedWork = 1_000_000
        for _ in 0..<5 {
            let server = HTTPServer(
                configuration: configuration, responder: ExecutorChoosingResponder(executor: CountingExecutor()),
                webSocketDelegate: nil)
            try server.start()
            let accepted = Counter()
            let ran = Counter()
            let stop = Counter()
            let finished = DispatchGroup()
            for index in 0..<3 {
                finished.enter()
                Thread {
                    defer { finished.leave() }
                    while stop.value == 0 {
                        if index == 0 { server.beginPostingBatch() }
                        if server.execute({ _ in ran.add(1) }) { accepted.add(1) }
                        if index == 0 { server.endPostingBatch(idle: true) }
                    }
                }.start()
            }
            try await Task.sleep(for: .milliseconds(20))
            await server.shutdown()
            stop.add(1)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                finished.notify(queue: .global()) { done.resume() }
            }
            #expect(accepted.value > 0)
            #expect(ran.value == accepted.value, "accepted work runs once: on the loop, or at its end")
        }
    }

    @Test func aResponderRunsEachRequestOnTheExecutorItChooses() async throws {
        let executor = CountingExecutor()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = HTTPServer(
            configuration: configuration, responder: ExecutorChoosingResponder(executor: executor), webSocketDelegate: nil)
        try server.start()
        let port = server.port
        func get(_ path: String) async throws -> Int {
            try await HTTPClient.send(
                method: "GET", url: URL(string: "http://127.0.0.1:\(port)\(path)")!, headers: [], body: nil,
                timeout: .seconds(10)).status
        }
        do {
            #expect(try await get("/elsewhere") == 200)
            #expect(executor.jobs.load(ordering: .sequentiallyConsistent) == 0)
            #expect(try await get("/on-executor") == 200)
            #expect(executor.jobs.load(ordering: .sequentiallyConsistent) >= 1)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }
}

/// Work the service thread hands itself (an order write it runs inline posts its answer and
/// frames): on the libev loop it runs before the loop next waits, with no wake-up sent; on the
/// poll loop it is woken as before. Either way it runs, also when that work posts more.
@Suite(.timeLimit(.minutes(1)))
struct SelfPostTests {
    @Test(arguments: [EventLoopKind.libev, .poll])
    func workTheServiceThreadPostsToItselfRuns(kind: EventLoopKind) async throws {
        try await withServer({ $0.eventLoop = kind }) { server in
            let ran = Counter()
            server.execute { _ in ran.add(1) }
            try #require(await eventually { ran.value == 1 })
            let before = server.serviceWakeUps
            server.execute { _ in  // one wake-up: posted from the test's thread
                server.execute { _ in
                    ran.add(10)
                    server.execute { _ in ran.add(100) }  // posted while the owed drain runs
                }
                server.beginPostingBatch()  // as a write run inline does
                server.execute { _ in ran.add(1000) }
                server.endPostingBatch(idle: true)
            }
            #expect(await eventually { ran.value == 1111 })
            let sent = server.serviceWakeUps - before
            if kind == .libev {
                #expect(sent == 1, "only the test thread's post woke the loop")
            } else {
                #expect(sent >= 2, "the poll loop is woken for its own posts too")
            }
            // The loop still sleeps and wakes normally afterwards.
            server.execute { _ in ran.add(10_000) }
            #expect(await eventually { ran.value == 11_111 })
        }
    }
}
