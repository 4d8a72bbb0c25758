import Foundation
import Synchronization
import Testing
import WaybillStorage
import WaybillTesting

/// `JobQueue`, the FIFO between a store's callers and its worker threads: batches come out oldest
/// first and never larger than asked, a worker asleep on an empty queue wakes for the next job, and a
/// closed queue is drained before its workers stop.
@Suite(.timeLimit(.minutes(1)))
struct JobQueueTests {
    /// `JobFIFO`, the queue's two lines: against a plain array, through appends, takes of every
    /// size (past the closing-up of taken slots, at half the storage) and put-backs with room at
    /// the front and without.
    @Test func theFIFOKeepsItsOrderThroughEveryKindOfStep() {
        var fifo = JobFIFO<Int>()
        var model: [Int] = []
        var next = 0
        var state: UInt64 = 7
        func random(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for _ in 0..<5_000 {
            switch random(10) {
            case 0..<5:
                for _ in 0..<random(8) {
                    fifo.append(next)
                    model.append(next)
                    next += 1
                }
            case 5..<9:
                let limit = random(12)
                let taken = fifo.take(upTo: limit)
                #expect(taken == Array(model.prefix(limit)))
                model.removeFirst(taken.count)
            default:
                let back = (0..<random(5)).map { _ in -1 - random(1_000) }
                fifo.prepend(contentsOf: back)
                model.insert(contentsOf: back, at: 0)
            }
            #expect(fifo.count == model.count && fifo.isEmpty == model.isEmpty)
        }
        #expect(fifo.take(upTo: .max) == model)
        #expect(fifo.isEmpty && fifo.take(upTo: 3).isEmpty)
    }

    /// A taken job is let go at once: a worker's closure holds what it captured only while it runs.
    @Test func aTakenJobIsNotKeptByTheQueue() {
        final class Box {}
        weak var gone: Box?
        var fifo = JobFIFO<Box>()
        do {
            let box = Box()
            gone = box
            fifo.append(box)
            for _ in 0..<3 { fifo.append(Box()) }
            // One of four: its slot is not closed up yet (that waits for half the storage).
            #expect(fifo.take(upTo: 1).count == 1)
        }
        #expect(gone == nil)
        #expect(fifo.count == 3)
    }

    @Test func batchesComeOutOldestFirstAndNoLargerThanAsked() {
        let queue = JobQueue<Int>()
        for job in 1...5 { #expect(queue.enqueue(job)) }
        #expect(queue.take(upTo: 2) == [1, 2])
        #expect(queue.count == 3)
        // Everything that is left fits: it all goes, and the queue is empty afterwards.
        #expect(queue.take(upTo: 10) == [3, 4, 5])
        #expect(queue.count == 0)
        #expect(queue.enqueue(6))
        #expect(queue.take(upTo: 1) == [6])
    }

    /// Urgent jobs (the live path's reads) go ahead of every other, in their own order; jobs put
    /// back stay at the very front.
    @Test func urgentJobsGoAheadOfTheOthersInTheirOwnOrder() {
        let queue = JobQueue<String>()
        for job in ["a", "b"] { #expect(queue.enqueue(job)) }
        #expect(queue.enqueue("u1", urgent: true))
        #expect(queue.enqueue("c"))
        #expect(queue.enqueue("u2", urgent: true))
        #expect(queue.take(upTo: 1) == ["u1"])
        #expect(queue.enqueue("u3", urgent: true))
        #expect(queue.take(upTo: 2) == ["u2", "u3"])
        #expect(queue.putBack(["x"]))
        #expect(queue.enqueue("u4", urgent: true))
        #expect(queue.take(upTo: 10) == ["x", "u4", "a", "b", "c"])
        #expect(queue.enqueue("d"))
        #expect(queue.enqueue("u5", urgent: true))
        #expect(queue.take(upTo: 10) == ["u5", "d"])
    }

    /// The signal goes out after the lock is released: a worker already asleep must still wake for
    /// the job (and for each later one), never sleep through it.
    @Test func aWorkerAsleepOnAnEmptyQueueWakesForEachJob() async throws {
        let queue = JobQueue<Int>()
        let taken = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        let worker = Thread {
            while let jobs = queue.take(upTo: 1) { taken.withLock { $0 += jobs } }
            done.signal()
        }
        worker.start()
        for job in 1...200 {
            // Let the worker reach its wait often, so most jobs find it asleep.
            if job % 10 == 0 { try await Task.sleep(for: .milliseconds(2)) }
            #expect(queue.enqueue(job))
        }
        var waited = 0
        while taken.withLock({ $0.count }) < 200, waited < 5_000 {
            try await Task.sleep(for: .milliseconds(1))
            waited += 1
        }
        #expect(taken.withLock { $0 } == Array(1...200))
        queue.close()
        var stopped = false
        for _ in 0..<5_000 where !stopped {
            stopped = done.wait(timeout: .now()) == .success
            if !stopped { try await Task.sleep(for: .milliseconds(1)) }
        }
        #expect(stopped, "a closed, drained queue stops its worker")
    }

    /// A worker kept for urgent jobs (`take(upTo:urgentOnly: true)`) takes an urgent job while
    /// every other worker is busy, never another kind, and stops when the queue closes: the live
    /// path's reads do not wait behind a reconnect storm's replays for a reader to come free.
    @Test func aReservedWorkerTakesUrgentJobsWhileTheOthersAreBusyAndNothingElse() async throws {
        let queue = JobQueue<String>()
        let reserved = Mutex<[String]>([]), general = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0), busy = DispatchSemaphore(value: 0)
        let reservedDone = DispatchSemaphore(value: 0), generalDone = DispatchSemaphore(value: 0)
        let worker = Thread {
            while let jobs = queue.take(upTo: 1) {
                general.withLock { $0 += jobs }
                if jobs == ["replay"] {
                    busy.signal()
                    _ = release.wait(timeout: .now() + 30)
                }
            }
            generalDone.signal()
        }
        let kept = Thread {
            while let jobs = queue.take(upTo: 1, urgentOnly: true) { reserved.withLock { $0 += jobs } }
            reservedDone.signal()
        }
        worker.start()
        kept.start()
        #expect(queue.enqueue("replay"))
        #expect(busy.wait(timeout: .now() + 20) == .success, "the only other worker is busy")
        #expect(queue.enqueue("list"))
        #expect(queue.enqueue("feed", urgent: true))
        #expect(await eventually { reserved.withLock { $0 } == ["feed"] }, "taken while the other worker is busy")
        #expect(queue.count == 1, "the list fetch is left for the other worker")
        #expect(queue.enqueue("relay", urgent: true))
        #expect(await eventually { reserved.withLock { $0 } == ["feed", "relay"] })
        release.signal()
        #expect(await eventually { general.withLock { $0 } == ["replay", "list"] })
        #expect(reserved.withLock { $0 } == ["feed", "relay"], "it never took the other kind")
        queue.close()
        #expect(reservedDone.wait(timeout: .now() + 20) == .success, "a closed queue stops the kept worker")
        #expect(generalDone.wait(timeout: .now() + 20) == .success)
    }

    /// With a worker idle, an urgent job is that worker's, as before: the kept one is not woken.
    @Test func anIdleWorkerTakesAnUrgentJobAndTheKeptOneIsNotWoken() async throws {
        let queue = JobQueue<String>()
        let reserved = Mutex<[String]>([]), general = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        Thread {
            while let jobs = queue.take(upTo: 1) { general.withLock { $0 += jobs } }
            done.signal()
        }.start()
        Thread {
            while let jobs = queue.take(upTo: 1, urgentOnly: true) { reserved.withLock { $0 += jobs } }
            done.signal()
        }.start()
        // Both asleep first: a kept worker still starting takes an urgent job it finds queued (it
        // is idle then too); a CI run on a busy machine started it after the enqueue.
        #expect(await eventually { queue.idleWorkerCount == 1 && queue.keptWorkersAsleepCount == 1 }, "both workers asleep")
        #expect(queue.enqueue("feed", urgent: true))
        #expect(await eventually { general.withLock { $0 } == ["feed"] })
        #expect(queue.enqueue("list"))
        #expect(await eventually { general.withLock { $0 } == ["feed", "list"] })
        queue.close()
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(reserved.withLock { $0 }.isEmpty, "never woken for a job an idle worker takes")
    }

    /// `wakeKeptWorkers` makes a kept worker's wait end with no job (the PostgreSQL kept reader
    /// looks after its connection then), once per call; an urgent job is still taken after it.
    @Test func aKeptWorkerWokenWithoutAJobReturnsAnEmptyBatchAndStillTakesUrgentJobs() async throws {
        let queue = JobQueue<String>()
        let batches = Mutex<[[String]]>([])
        let done = DispatchSemaphore(value: 0)
        Thread {
            while let jobs = queue.take(upTo: 1, urgentOnly: true) { batches.withLock { $0.append(jobs) } }
            done.signal()
        }.start()
        #expect(await eventually { queue.keptWorkersAsleepCount == 1 })
        queue.wakeKeptWorkers()
        #expect(await eventually { batches.withLock { $0 } == [[]] }, "woken with no job")
        #expect(await eventually { queue.keptWorkersAsleepCount == 1 }, "asleep again, not spinning")
        #expect(batches.withLock { $0 } == [[]])
        // A wake-up and an urgent job together: the job is not lost behind the empty batch.
        queue.wakeKeptWorkers()
        Thread { _ = queue.enqueue("feed", urgent: true) }.start()
        #expect(await eventually { batches.withLock { $0 }.flatMap { $0 } == ["feed"] })
        queue.close()
        #expect(done.wait(timeout: .now() + 20) == .success)
    }

    /// Two kept workers asleep both stop at the close (the first one woken must not take the other's
    /// wake-up with it).
    @Test func theCloseStopsEveryReservedWorker() async {
        let queue = JobQueue<Int>()
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<2 {
            Thread {
                while queue.take(upTo: 1, urgentOnly: true) != nil {}
                done.signal()
            }.start()
        }
        // Both asleep in their wait before the close: the case this test is about.
        #expect(await eventually { queue.keptWorkersAsleepCount == 2 })
        queue.close()
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(done.wait(timeout: .now() + 20) == .success)
    }

    @Test func aClosedQueueRefusesNewJobsAndIsDrainedBeforeItsWorkersStop() {
        let queue = JobQueue<String>()
        #expect(queue.enqueue("queued before close"))
        queue.close()
        #expect(!queue.enqueue("after close"), "a closed queue refuses jobs")
        #expect(queue.take(upTo: 4) == ["queued before close"])
        #expect(queue.take(upTo: 4) == nil, "drained and closed: the worker stops")
    }

    /// The quiet thread (the SQLite writer's inline path) takes only what it queued itself, and
    /// what it puts back goes before anything queued after it.
    @Test func theQuietThreadTakesOnlyItsOwnJobsAndPutsBackAtTheFront() throws {
        let queue = JobQueue<Int>()
        #expect(queue.beginQuietEnqueues(), "an empty queue")
        #expect(queue.enqueue(1) && queue.enqueue(2))
        #expect(queue.takeOwn(upTo: 1) == [1])
        // Another thread queues a job: from then on the rest is the worker's.
        let other = Thread { _ = queue.enqueue(3) }
        other.start()
        while queue.count < 2 { usleep(100) }
        #expect(queue.takeOwn(upTo: 10) == nil)
        #expect(queue.putBack([1]))
        queue.endQuietEnqueues()
        #expect(queue.take(upTo: 10) == [1, 2, 3], "put back in front of what was queued after it")

        // A scope that begins with others' work queued takes nothing.
        #expect(queue.enqueue(4))
        #expect(!queue.beginQuietEnqueues(), "others' work queued")
        #expect(queue.enqueue(5))
        #expect(queue.takeOwn(upTo: 10) == nil)
        queue.endQuietEnqueues()
        #expect(queue.take(upTo: 10) == [4, 5])

        // A closed queue takes nothing back: its workers may be gone.
        queue.close()
        #expect(!queue.putBack([6]))
        #expect(queue.take(upTo: 10) == nil)
    }
}
