import Foundation
import Testing
import WaybillAPI
import WaybillNetwork
import WaybillDomain
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// The `waybill` executable itself: `serve` stops gracefully on SIGTERM, `driver --json` follows
/// and moves orders as a script would drive it.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ExecutableTests {
    @Test func serveClosesSocketsWith1001AndExitsCleanlyOnSIGTERM() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (seed, server) = try await Self.seededServer(in: directory)
        defer { server.terminate() }
        let port = try #require(await Self.port(of: server))
        let socket = try await TestSocket.open(port: port, query: "token=\(seed.drivers[0].token)")
        #expect(await socket.next()?["type"] as? String == "connected")
        server.signal(SIGTERM)
        #expect(await socket.closed() == 1001)
        #expect(await server.exitStatus() == 0)
        #expect(server.stderr.contains { $0.contains("msg=\"server stopped\"") })
    }

    /// `open` on a server that stopped answering (frozen: connections hang, nothing is refused) does
    /// not hold the next command: the action typed after it is queued at once.
    @Test func driverOpenDoesNotHoldTheNextCommand() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (seed, server) = try await Self.seededServer(in: directory)
        defer {
            server.signal(SIGCONT)
            server.terminate()
        }
        let port = try #require(await Self.port(of: server))
        let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
        let app = try Self.driverApp(server: "http://127.0.0.1:\(port)", stateIn: directory, as: driver)
        defer { app.signal(SIGKILL) }
        let list = try #require(await app.line(timeout: .seconds(30)) { $0["kind"] as? String == "list" })
        server.signal(SIGSTOP)
        app.type("open \(id)")
        app.type("accept \(id)")
        // Well under the 30 s the offline fetch would take to time out, which is what this rules out.
        let queued = await app.line(after: list.index, timeout: .seconds(15)) {
            $0["kind"] as? String == "action" && $0["state"] as? String == "waiting"
        }
        #expect(queued != nil, "\(app.stdout.suffix(3))")
    }

    @Test func seedWritesFinishedHistoryAndRefusesABadCount() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let seedFile = directory.appendingPathComponent("seed.json").path
        let seeding = try ChildProcess([
            "seed", "--data-dir", directory.path, "--drivers", "2", "--orders-per-driver", "1",
            "--finished-per-driver", "30", "--out", seedFile, "--password-iterations", "1000",
        ])
        #expect(await seeding.exitStatus() == 0)
        #expect(seeding.stderr.contains { $0.contains("60 finished orders") }, "\(seeding.stderr)")
        let store = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        defer { store.close() }
        let seed = try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: seedFile)))
        let counts = try await store.read { tx in try tx.orderCounts(in: CompanyID(seed.companyID), driver: nil) }
        #expect((counts[.completed] ?? 0) + (counts[.cancelled] ?? 0) == 60 && counts[.assigned] == 2)

        let refused = try ChildProcess([
            "seed", "--data-dir", directory.path, "--finished-per-driver", "-1", "--out", seedFile,
        ])
        #expect(await refused.exitStatus() != 0)
        #expect(refused.stderr.contains { $0.contains("--finished-per-driver") }, "\(refused.stderr)")
    }

    /// Values out of range are refused at start with the flag's name: a retention of 0 days pruned
    /// every relayed event at each run, and a huge one trapped on the overflow; a ticket lifetime
    /// of 0 made every ticket expire as it was issued (every socket 4001); 0 password iterations
    /// stopped the process at the first login with an unknown email; a socket queue of 0 bytes
    /// closed every socket at its `connected` frame; a body limit of 0 refused every login; a huge
    /// ping interval trapped; an empty host listened on every interface; a mistyped web directory
    /// served 404s; `--data-dir` beside `--database-url` was silently unused.
    @Test(arguments: [
        (["--retention-days", "0"], "--retention-days must be 1…3650"),
        (["--retention-days", "-1"], "--retention-days must be 1…3650"),
        (["--retention-days", "999999999999999"], "--retention-days must be 1…3650"),
        (["--ticket-seconds", "0"], "--ticket-seconds must be 1…60"),
        (["--ticket-seconds", "61"], "--ticket-seconds must be 1…60"),
        (["--password-iterations", "0"], "--password-iterations must be 1…10000000"),
        (["--password-iterations", "10000001"], "--password-iterations must be 1…10000000"),
        (["--max-body-bytes", "0"], "--max-body-bytes must be 4096…1073741824"),
        (["--max-socket-queue-bytes", "0"], "--max-socket-queue-bytes must be 65536…1073741824"),
        (["--token-days", "0"], "--token-days must be 1…3650"),
        (["--ping-interval", "0"], "--ping-interval must be 1…3600"),
        (["--ping-interval", "1000000000000000000"], "--ping-interval must be 1…3600"),
        (["--keep-alive-seconds", "0"], "--keep-alive-seconds must be 1…3600"),
        (["--keep-alive-seconds", "3601"], "--keep-alive-seconds must be 1…3600"),
        (["--host", ""], "--host must not be empty"),
        (["--web-dir", "/nonexistent-waybill-web"], "--web-dir /nonexistent-waybill-web has no index.html"),
        (["--database-url", "postgresql://waybill@127.0.0.1:1/waybill"], "--data-dir (SQLite) and --database-url (PostgreSQL) name two stores"),
        (["--max-sockets-per-user", "0"], "--max-sockets-per-user must be ≥ 1"),
        (["--user-requests-per-second", "-1"], "--user-requests-per-second must be ≥ 0"),
        (["--user-request-burst", "0"], "--user-request-burst must be ≥ 1"),
        (["--port", "65536"], "--port must be 0…65535"),
        (["--port", "eighty"], "--port must be a whole number"),
    ])
    func outOfRangeSettingsAreRefusedAtStart(flags: [String], message: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ChildProcess(["serve", "--port", "0", "--data-dir", directory.path] + flags)
        defer { server.terminate() }
        #expect(await server.exitStatus(timeout: .seconds(10)) != 0)
        #expect(server.stderr.contains { $0.contains(message) }, "\(server.stderr)")
    }

    /// A cluster node that cannot reach its database, or was given a bad URL, says so in one line
    /// and exits 1 (never a crash, never a hang); a bad Redis URL likewise.
    @Test(arguments: [
        (["--database-url", "postgresql://waybill@127.0.0.1:1/waybill"], "store unavailable: cannot open PostgreSQL"),
        (["--database-url", "mysql://nope"], "invalid PostgreSQL URL"),
        (["--redis-url", "rediss://example:6380"], "invalid Redis URL"),
    ])
    func clusterFlagsWithABadTargetFailWithOneClearLine(flags: [String], message: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // `--data-dir` beside `--database-url` is refused on its own (above).
        let store = flags.contains("--database-url") ? [] : ["--data-dir", directory.path]
        let server = try ChildProcess(["serve", "--port", "0"] + store + flags)
        defer { server.terminate() }
        #expect(await server.exitStatus(timeout: .seconds(10)) == 1)
        let errors = server.stderr.filter { $0.hasPrefix("waybill serve:") }
        #expect(errors.count == 1 && errors[0].contains(message), "\(server.stderr)")
    }

    /// What the program creates is its user's alone: the data directory, the database and its
    /// WAL (password hashes, emails), and `seed --out` (passwords and tokens). Under the usual
    /// umask they were readable by every local user (found by a review, 2026-12-03).
    @Test func filesItCreatesAreReadableByItsUserOnly() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (_, server) = try await Self.seededServer(in: directory)
        defer { server.terminate() }
        _ = try #require(await Self.port(of: server))
        func mode(_ name: String) throws -> Int {
            let path = name.isEmpty ? directory.path : directory.appendingPathComponent(name).path
            return (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? 0o777) & 0o777
        }
        #expect(try mode("") == 0o700)
        for file in ["waybill.sqlite", "waybill.sqlite-wal", "seed.json"] {
            let bits = try mode(file)
            #expect(bits & 0o077 == 0, "\(file): \(String(bits, radix: 8))")
        }
    }

    /// `--out` naming a file that exists with a loose mode (made by `touch`, an older build, another
    /// user) gets 0600 before the passwords go in; a symbolic link is refused, not followed.
    @Test func seedOutIsMadePrivateAndNeverFollowsALink() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let loose = directory.appendingPathComponent("loose.json").path
        #expect(FileManager.default.createFile(atPath: loose, contents: Data("old".utf8), attributes: [.posixPermissions: 0o666]))
        let seeding = try ChildProcess([
            "seed", "--data-dir", directory.appendingPathComponent("data").path, "--out", loose, "--password-iterations", "1000",
        ])
        #expect(await seeding.exitStatus(timeout: .seconds(30)) == 0)
        let bits = (try FileManager.default.attributesOfItem(atPath: loose)[.posixPermissions] as? Int ?? 0o777) & 0o777
        #expect(bits == 0o600, "\(String(bits, radix: 8))")
        #expect(try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: loose))).drivers.count > 0)

        let target = directory.appendingPathComponent("elsewhere.json").path, link = directory.appendingPathComponent("link.json").path
        #expect(FileManager.default.createFile(atPath: target, contents: Data("mine".utf8)))
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let viaLink = try ChildProcess([
            "seed", "--data-dir", directory.appendingPathComponent("data2").path, "--out", link, "--password-iterations", "1000",
        ])
        #expect(await viaLink.exitStatus(timeout: .seconds(30)) != 0)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "mine", "the link's target is untouched")
    }

    /// `seed --demo` makes the demo company of `waybill demo` (what `make cluster` seeds into PostgreSQL).
    @Test func seedDemoWritesTheDemoCompanyWithItsKnownLogins() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("seed.json").path
        let seeding = try ChildProcess([
            "seed", "--data-dir", directory.path, "--demo", "--out", out, "--password-iterations", "1000",
        ])
        #expect(await seeding.exitStatus(timeout: .seconds(30)) == 0)
        let seed = try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: out)))
        #expect(seed.dispatcher.email == "dispatcher@demo.example.com")
        #expect(seed.dispatcher.password == "demo-dispatcher")
        #expect(seed.drivers.map(\.email) == (1...3).map { "driver\($0)@demo.example.com" })
        #expect(seed.drivers.allSatisfy { $0.password == "demo-driver" && $0.orderIDs?.count == 2 })
    }

    /// `waybill demo` on a directory that already has the demo company (`seed --demo`, or a first
    /// start stopped after the seed) serves it: a marker file written after the seed decided, and
    /// every such start failed on the taken emails.
    @Test func theDemoServesADirectoryThatAlreadyHasItsCompany() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("seed.json").path
        let seeding = try ChildProcess(["seed", "--data-dir", directory.path, "--demo", "--out", out, "--password-iterations", "1000"])
        #expect(await seeding.exitStatus(timeout: .seconds(30)) == 0)
        let demo = try ChildProcess(["demo", "--port", "0", "--data-dir", directory.path, "--password-iterations", "1000"])
        defer { demo.terminate() }
        let port = try #require(await Self.port(of: demo), "\(demo.stderr)")
        let body = try JSONSerialization.data(withJSONObject: ["email": "dispatcher@demo.example.com", "password": "demo-dispatcher"])
        let login = try await HTTPClient.send(
            method: "POST", url: URL(string: "http://127.0.0.1:\(port)/api/auth/login")!,
            headers: [("Content-Type", "application/json")], body: Array(body), timeout: .seconds(30))
        #expect(login.status == 200)
    }

    /// `seed --out` that cannot be written is refused before anything is seeded: the passwords and
    /// tokens exist only in that file, and a rerun made a second company.
    @Test func seedRefusesAnOutFileItCannotWriteBeforeSeeding() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let unwritable = try ChildProcess([
            "seed", "--data-dir", directory.path, "--out", "/nonexistent-waybill/seed.json", "--password-iterations", "1000",
        ])
        #expect(await unwritable.exitStatus(timeout: .seconds(30)) != 0)
        #expect(unwritable.stderr.contains { $0.contains("--out /nonexistent-waybill/seed.json cannot be written") })
        let out = directory.appendingPathComponent("seed.json").path
        let seeding = try ChildProcess(["seed", "--data-dir", directory.path, "--out", out, "--password-iterations", "1000"])
        #expect(await seeding.exitStatus(timeout: .seconds(30)) == 0)
        let seed = try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: out)))
        #expect(seed.companyID == 1, "the refused seed left no company behind")
        // A seed that fails (the demo's emails, taken by a first `--demo` seed) leaves the file
        // it was to write as it was: the only copy of the earlier passwords and tokens.
        let demoOut = directory.appendingPathComponent("demo.json").path
        for attempt in 0..<2 {
            let demo = try ChildProcess([
                "seed", "--data-dir", directory.path, "--demo", "--out", demoOut, "--password-iterations", "1000",
            ])
            #expect(await demo.exitStatus(timeout: .seconds(30)) == (attempt == 0 ? 0 : 1))
        }
        let kept = try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: demoOut)))
        #expect(kept.dispatcher.email == "dispatcher@demo.example.com")
        // And one it created for a seed that failed is not left behind empty.
        let fresh = directory.appendingPathComponent("fresh.json").path
        let failing = try ChildProcess([
            "seed", "--data-dir", directory.path, "--demo", "--out", fresh, "--password-iterations", "1000",
        ])
        #expect(await failing.exitStatus(timeout: .seconds(30)) == 1)
        #expect(!FileManager.default.fileExists(atPath: fresh))
    }

    @Test func driverJSONModeFollowsChangesAndTakesCommands() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let app = try Self.driverApp(on: server, as: driver)
            defer { app.terminate() }
            // The first line waits for a process start, a login and a list on a runner that may be
            // running hundreds of other tests (it took over 10 s once).
            let list = try #require(
                await app.line(timeout: .seconds(30)) { $0["kind"] as? String == "list" && ($0["orders"] as? [Any])?.count == 2 })
            let live = await app.line { $0["kind"] as? String == "connection" && $0["state"] as? String == "live" }
            #expect(live != nil)
            app.type("open \(id)")
            let detail = try #require(await app.line(after: list.index) { $0["kind"] as? String == "detail" })
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "gate 4"])
            let changed = await app.line(after: detail.index) {
                ($0["order"] as? [String: Any])?["notes"] as? String == "gate 4"
            }
            #expect(changed != nil)
            app.type("accept \(id)")
            let accepted = await app.line(after: detail.index) { object in
                let orders = object["orders"] as? [[String: Any]] ?? []
                return orders.contains { ($0["id"] as? Int).map(Int64.init) == id && $0["status"] as? String == "accepted" }
            }
            #expect(accepted != nil)
            let order = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(order.object.string("status") == "accepted")
            // Logged out elsewhere: the app says why and exits with status 3.
            _ = try await server.request("POST", "/api/auth/logout", token: driver.token)
            let stopped = await app.line { $0["kind"] as? String == "connection" && $0["state"] as? String == "stopped" }
            #expect(stopped != nil)
            #expect(await app.exitStatus() == 3)
        }
    }

    /// stdin at its end from the start (a pipe that closed, `/dev/null` under a supervisor): the app
    /// keeps following changes until a signal, and `close` takes an order off the output.
    @Test func driverWithStdinClosedKeepsFollowingAndStopsOnSIGTERM() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let app = try Self.driverApp(on: server, as: driver)
            defer { app.signal(SIGKILL) }
            // What the app said, if it never got live (a CI run once waited the whole 30 s).
            let live = try #require(
                await app.line(timeout: .seconds(30)) { $0["kind"] as? String == "connection" && $0["state"] as? String == "live" },
                "stdout: \(app.stdout.suffix(8)) stderr: \(app.stderr.suffix(8)) server: \(server.logs.all.suffix(8))")
            app.type("open \(id)")
            let detail = try #require(await app.line(after: live.index) { $0["kind"] as? String == "detail" })
            app.type("close \(id)")
            let removed = await app.line(after: detail.index) {
                $0["kind"] as? String == "detail_removed" && ($0["id"] as? Int).map(Int64.init) == id
            }
            #expect(removed != nil, "\(app.stdout.suffix(3))")
            app.closeInput()
            try await Task.sleep(for: .milliseconds(300))
            #expect(app.isRunning, "\(app.stderr.suffix(5))")
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["title": "after EOF"])
            let changed = await app.line(after: detail.index) { object in
                let orders = object["orders"] as? [[String: Any]] ?? []
                return orders.contains { $0["title"] as? String == "after EOF" }
            }
            #expect(changed != nil, "\(app.stderr.suffix(5))")
            app.terminate()
            #expect(await app.exitStatus() == 0)
        }
    }

    /// A script's last action right before `quit` still reaches the server: leaving waits a little
    /// for the queue instead of abandoning the send in flight.
    @Test func driverQuitRightAfterAnActionStillSendsIt() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let app = try Self.driverApp(on: server, as: driver)
            defer { app.signal(SIGKILL) }
            _ = try #require(await app.line(timeout: .seconds(30)) { $0["kind"] as? String == "list" })
            app.type("accept \(id)")
            app.type("quit")
            #expect(await app.exitStatus() == 0)
            let order = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(order.object.string("status") == "accepted", "\(app.stdout.suffix(4))")

            // With the server gone the action cannot leave: the app says so and where it is kept.
            let offline = try Self.driverApp(on: server, as: driver)
            defer { offline.signal(SIGKILL) }
            let live = try #require(await offline.line { $0["kind"] as? String == "connection" && $0["state"] as? String == "live" })
            await server.stopServer()
            offline.type("start \(id)")
            offline.type("quit")
            #expect(await offline.exitStatus() == 0)
            let kept = await offline.line(after: live.index) {
                $0["kind"] as? String == "error" && ($0["message"] as? String)?.contains("1 action not sent yet") == true
            }
            #expect(kept != nil, "\(offline.stdout.suffix(4))")
        }
    }

    /// A second app for the same login and queue file would write over the first one's unsent
    /// actions: it refuses to start.
    @Test func aSecondDriverAppForTheSameLoginRefusesToStart() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let first = try Self.driverApp(on: server, as: seed.drivers[0])
            defer { first.signal(SIGKILL) }
            _ = try #require(await first.line { $0["kind"] as? String == "list" })
            let second = try Self.driverApp(on: server, as: seed.drivers[0])
            defer { second.signal(SIGKILL) }
            #expect(await second.exitStatus() == 1)
            #expect(second.stdout.contains { $0.contains("another 'waybill driver'") }, "\(second.stdout)")
            #expect(first.isRunning)
            first.terminate()
            #expect(await first.exitStatus() == 0)
            // The lock goes with the process: a new app starts.
            let third = try Self.driverApp(on: server, as: seed.drivers[0])
            defer { third.signal(SIGKILL) }
            #expect(await third.line { $0["kind"] as? String == "list" } != nil)
        }
    }

    /// The driver app with a dispatcher's login would follow the whole company as if it were the
    /// driver's list: it refuses, with the exit status of a refused login (found by a review).
    @Test func driverAppRefusesADispatchersLogin() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let app = try Self.driverApp(on: server, as: seed.dispatcher)
            defer { app.signal(SIGKILL) }
            #expect(await app.exitStatus() == 3)
            #expect(app.stdout.contains { $0.contains("this app is for drivers") }, "\(app.stdout)")
        }
    }

    /// `--email --password secret`: the missing email is reported, and the secret is not echoed.
    @Test func aFlagWithoutItsValueDoesNotEchoTheNextOne() async throws {
        let app = try ChildProcess(["driver", "--server", "http://127.0.0.1:9", "--email", "--password", "hunter2-secret"])
        #expect(await app.exitStatus() != 0)
        let errors = app.stderr.joined(separator: "\n")
        #expect(errors.contains("--email needs a value"), "\(errors)")
        #expect(!errors.contains("hunter2-secret"))
    }

    /// The app has no TLS: a server on another machine would get the password and every token in
    /// the clear, so it is refused before anything is sent, unless asked for (found by a review).
    @Test func driverRefusesAServerElsewhereOverPlainHTTP() async throws {
        for server in ["http://192.0.2.1:8080", "http://waybill.example.com", "http://[2001:db8::1]:80"] {
            let app = try ChildProcess(["driver", "--server", server, "--email", "d@example.com", "--json"])
            app.closeInput()
            #expect(await app.exitStatus() == 2)
            #expect(app.stderr.joined().contains("unencrypted"), "\(server): \(app.stderr)")
        }
        for server in ["http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9"] {
            let app = try ChildProcess(["driver", "--server", server, "--email", "d@example.com", "--password", "x", "--json"])
            #expect(await app.exitStatus() == 1, "\(server): on this machine it tries, and finds nothing there")
            #expect(!app.stderr.joined().contains("unencrypted"))
        }
    }

    /// A login the server did not refuse (it cannot be reached) exits 1, not 3: a supervisor
    /// that stops on 3 ("bad credentials") would otherwise give up on an outage.
    @Test func driverExitsWith1WhenTheServerCannotBeReachedAtStart() async throws {
        let app = try ChildProcess(["driver", "--server", "http://127.0.0.1:9", "--email", "d@example.com", "--password", "x", "--json"])
        #expect(await app.exitStatus() == 1)
        #expect(app.stdout.contains { $0.contains("login failed") })
    }

    /// `waybill driver --json | head -1`: the reader goes away, and the app ends quietly (it trapped
    /// in `FileHandle.write` on EPIPE, since SIGPIPE is ignored for the sockets).
    @Test func driverWhoseOutputIsClosedExitsQuietly() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            var output: [Int32] = [-1, -1]
            #expect(pipe(&output) == 0)
            let pid = try Spawn.start(
                ChildProcess.waybillPath,
                ["driver", "--server", server.baseURL, "--email", driver.email, "--password", driver.password, "--json",
                 "--state-dir", server.directory.appendingPathComponent("driver-state").path],
                environment: ChildProcess.environment
            ) { actions in
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_adddup2(&actions, output[1], 1)
                posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            }
            close(output[1])
            close(output[0])  // nobody reads: the app's first line meets EPIPE
            let status = try await runBlocking { () -> Int32 in
                var raw: Int32 = 0
                waitpid(pid, &raw, 0)
                return (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            }
            #expect(status == 0)
        }
    }

    @Test func seedWorksWhileAServerRunsOnTheSameDataDirectory() async throws {
        try await TestServer.withRunning { server in
            let out = server.directory.appendingPathComponent("seed.json").path
            let seeding = try ChildProcess([
                "seed", "--data-dir", server.directory.path, "--drivers", "2", "--orders-per-driver", "3", "--out", out,
                "--password-iterations", "1000",
            ])
            #expect(await seeding.exitStatus(timeout: .seconds(30)) == 0)
            let seed = try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: out)))
            #expect(seed.drivers.count == 2 && seed.drivers.allSatisfy { $0.orderIDs?.count == 3 })
            let login = try await server.request(
                "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password])
            #expect(login.status == 200)
            let orders = try await server.request("GET", "/api/orders/", token: seed.dispatcherToken)
            #expect(orders.array.count == 6)
            // The running server's relay finds the other process's events in the outbox too.
            #expect(try await server.server.waitUntilDelivered())
        }
    }

    /// A log collector that stops reading the server's stderr does not stop the server: its log
    /// lines wait in a buffer (and past it are dropped and counted), and it keeps answering. With a
    /// blocking write per line, the service thread stopped at its first access line past the pipe's
    /// 64 KiB (about 400 requests).
    @Test func aStuckLogReaderDoesNotStopTheServer() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let seeding = try ChildProcess([
            "seed", "--data-dir", directory.path, "--drivers", "1", "--password-iterations", "1000",
            "--out", directory.appendingPathComponent("seed.json").path,
        ])
        #expect(await seeding.exitStatus() == 0)
        let server = try ChildProcess(
            ["serve", "--port", "0", "--data-dir", directory.path], pausingStderrAfter: "msg=\"server started\"")
        defer { server.terminate() }
        let port = try #require(await Self.port(of: server))
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/healthz"))
        // 2 000 access lines of about 150 bytes: about 300 KB, nearly five pipes' worth.
        var answered = 0
        for _ in 0..<2_000 {
            let answer = try await HTTPClient.send(method: "GET", url: url, headers: [], body: nil, timeout: .seconds(10))
            guard answer.status == 200 else { break }
            answered += 1
        }
        #expect(answered == 2_000, "the server answered while nobody read its log")
        server.resumeStderr()
        server.terminate()
        #expect(await server.exitStatus() == 0)
        let lines = server.stderr
        #expect(lines.filter { $0.contains("path=/healthz") }.count == 2_000, "the buffered lines all came out")
        #expect(lines.contains { $0.contains("msg=\"server stopped\"") }, "flushed at exit")
    }

    /// Out of descriptors, a queued connection is accepted and closed at once (its client sees the
    /// end and backs off), instead of staying queued and waking the service thread on every pass:
    /// lws 4.1's own accept only logged the error and spun at a full core. Once descriptors are free
    /// again, the server answers.
    @Test func outOfDescriptorsQueuedConnectionsAreShedWithoutSpinning() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // About 32 descriptors are the server's own (store, log, loop): room for a few dozen sockets.
        let server = try ChildProcess(["serve", "--port", "0", "--data-dir", directory.path], openFileLimit: 64)
        defer { server.terminate() }
        let port = try #require(await Self.port(of: server))
        let held = try await runBlocking { try (0..<120).map { _ in try RawConnection(port: port, timeout: .seconds(5)) } }
        // Connections the server closed without a word: the ones it could not keep.
        func shedCount() -> Int {
            held.filter { connection in
                var byte: UInt8 = 0
                return recv(connection.fileDescriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0  // end of stream
            }.count
        }
        #expect(await eventually(timeout: .seconds(10)) { shedCount() > 0 }, "connections past the limit are shed")
        let busy = try #require(await Self.cpuSeconds(of: server.pid, over: .seconds(2)))
        #expect(busy < 1.0, "the server spun on the queued connections: \(busy) s of CPU in 2 s")
        held.forEach { $0.close() }
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/healthz"))
        #expect(
            await eventually(timeout: .seconds(15)) {
                (try? await HTTPClient.send(method: "GET", url: url, headers: [], body: nil, timeout: .seconds(2)))?.status == 200
            }, "answers again once descriptors are free")
        server.signal(SIGTERM)
        #expect(await server.exitStatus() == 0)
    }

    /// CPU time (user + system) `pid` used during `window`, from /proc (clock ticks of 1/100 s).
    static func cpuSeconds(of pid: pid_t, over window: Duration) async -> Double? {
        func ticks() -> Double? {
            // utime and stime: fields 14 and 15 of proc(5).
            guard let fields = ProcessStat.fields(of: pid), fields.count > 13, let user = Double(fields[11]),
                let system = Double(fields[12])
            else { return nil }
            return user + system
        }
        guard let before = ticks() else { return nil }
        try? await Task.sleep(for: window)
        guard let after = ticks() else { return nil }
        return (after - before) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func port(of server: ChildProcess) async -> Int? {
        let deadline = ContinuousClock.now + .seconds(30)  // a start on a busy runner
        while ContinuousClock.now < deadline {
            for line in server.stderr where line.contains("msg=\"server started\"") {
                if let range = line.range(of: #"port=(\d+)"#, options: .regularExpression) {
                    return Int(line[range].dropFirst(5))
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// `waybill driver --json` as `driver`, against `server`, with its queue in the server's temp folder.
    static func driverApp(on server: TestServer, as driver: Seeder.Result.Account) throws -> ChildProcess {
        try driverApp(server: server.baseURL, stateIn: server.directory, as: driver)
    }

    /// `waybill driver --json` as `driver` against the server at `url`, its queue under `directory`.
    static func driverApp(server url: String, stateIn directory: URL, as driver: Seeder.Result.Account) throws -> ChildProcess {
        try ChildProcess([
            "driver", "--server", url, "--email", driver.email, "--password", driver.password, "--json",
            "--state-dir", directory.appendingPathComponent("driver-state").path,
        ])
    }

    /// `--user-requests-per-second` and `--user-request-burst` reach the running server: past the
    /// burst a user's request is 429 with `Retry-After`; the help names both and the default.
    @Test func theUserRequestFlagsLimitAUsersRequests() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (seed, server) = try await Self.seededServer(
            in: directory, serving: ["--user-requests-per-second", "1", "--user-request-burst", "2"])
        defer { server.terminate() }
        let port = try #require(await Self.port(of: server))
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/api/me"))
        // At 1 a second after a burst of 2, asking at once: the third or a later one (a stalled
        // runner may refill a token between two) is refused.
        var statuses: [Int] = []
        var retryAfter: String?
        while statuses.count < 10, statuses.last != 429 {
            let answer = try await HTTPClient.send(
                method: "GET", url: url, headers: [("Authorization", "Bearer \(seed.dispatcherToken)")], body: nil,
                timeout: .seconds(10))
            statuses.append(answer.status)
            retryAfter = answer.headers["retry-after"]
        }
        #expect(statuses.prefix(2) == [200, 200] && statuses.last == 429, "\(statuses)")
        #expect(retryAfter == "1")
        let help = try ChildProcess(["serve", "--help"])
        #expect(await help.exitStatus() == 0)
        let text = help.stdout.joined(separator: "\n")
        #expect(text.contains("--user-requests-per-second N") && text.contains("WAYBILL_USER_REQUESTS_PER_SECOND, default 200"))
        #expect(text.contains("--user-request-burst N") && text.contains("WAYBILL_USER_REQUEST_BURST, default 400"))
    }

    /// `--keep-alive-seconds` reaches the running server: with 1, an idle kept-alive connection is
    /// closed within a few seconds, where the default (5) keeps it past them; the help names it.
    @Test func theKeepAliveFlagSetsHowLongAnIdleConnectionStays() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-exe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        for (flags, closesSoon) in [([String](), false), (["--keep-alive-seconds", "1"], true)] {
            let server = try ChildProcess(["serve", "--port", "0", "--data-dir", directory.path] + flags)
            defer { server.terminate() }
            let port = try #require(await Self.port(of: server))
            let (status, closed) = try await runBlocking { () -> (Int, Bool) in
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/healthz"))
                return (try c.readResponse().status, c.waitForClose(timeout: .seconds(3)))
            }
            #expect(status == 200)
            #expect(closed == closesSoon, "\(flags)")
            server.terminate()
            _ = await server.exitStatus()
        }
        let help = try ChildProcess(["serve", "--help"])
        #expect(await help.exitStatus() == 0)
        #expect(help.stdout.joined(separator: "\n").contains("WAYBILL_KEEP_ALIVE_SECONDS, default 5"))
    }

    /// `waybill seed` (one driver, one order) into `directory`, then `waybill serve` on it, both as
    /// child processes; the caller stops the server.
    static func seededServer(in directory: URL, serving extra: [String] = []) async throws -> (Seeder.Result, ChildProcess) {
        let seedFile = directory.appendingPathComponent("seed.json").path
        let seeding = try ChildProcess([
            "seed", "--data-dir", directory.path, "--drivers", "1", "--orders-per-driver", "1", "--out", seedFile,
            "--password-iterations", "1000",
        ])
        #expect(await seeding.exitStatus() == 0)
        let seed = try JSONDecoder().decode(Seeder.Result.self, from: Data(contentsOf: URL(fileURLWithPath: seedFile)))
        return (seed, try ChildProcess(["serve", "--port", "0", "--data-dir", directory.path] + extra))
    }
}
