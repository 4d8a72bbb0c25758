import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillSQLite
import WaybillStorage

@Suite(.timeLimit(.minutes(1)))
struct SocketAuthTests {
    @Test func ticketWorksOnceAndOnlyOnce() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let token = seed.drivers[0].token
            let ticket = try #require(try await server.request("POST", "/api/ws-ticket", token: token).object.string("ticket"))
            let first = try await TestSocket.open(port: server.port, query: "ticket=\(ticket)")
            #expect(await first.next()?["type"] as? String == "connected")
            let reused = try await TestSocket.open(port: server.port, query: "ticket=\(ticket)")
            #expect(await reused.closed() == 4001)
        }
    }

    /// A ticket taken before a logout cannot open a socket after it: logout ends every session.
    @Test func aTicketTakenBeforeALogoutIs4001AfterIt() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let token = seed.drivers[0].token
            let ticket = try #require(try await server.request("POST", "/api/ws-ticket", token: token).object.string("ticket"))
            #expect(try await server.request("POST", "/api/auth/logout", token: token).status == 204)
            let socket = try await TestSocket.open(port: server.port, query: "ticket=\(ticket)")
            // Refused at the handshake: no `connected` frame first (a socket wrongly admitted would
            // also be closed with 4001, later, by the session watcher).
            let first = await socket.next()
            #expect(first == nil, "admitted: \(String(describing: first))")
            #expect(await socket.closed() == 4001)
        }
    }

    /// Log out, log straight back in: the new session's socket stays open. The node closed the old
    /// sockets at the logout; its session watcher finds the same logout in the store about 250 ms
    /// later and closed the user's sockets again, the new one included (4001: "log in again").
    @Test func aLoginRightAfterALogoutKeepsItsSocket() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let driver = seed.drivers[0]
            #expect(try await server.request("POST", "/api/auth/logout", token: driver.token).status == 204)
            let login = try await server.request("POST", "/api/auth/login", json: ["email": driver.email, "password": driver.password])
            let token = try #require(login.object.string("token"))
            let (socket, _) = try await server.connectedSocket(token: token)
            try await Task.sleep(for: .milliseconds(1200))  // past several watcher polls (250 ms)
            await socket.send(#"{"type":"ping"}"#)
            let answer = await socket.next(timeout: .seconds(20))
            #expect(answer?["type"] as? String == "pong", "the new login's socket was closed")
        }
    }

    /// The token is revoked while this node still has it cached (a logout on another node, not yet
    /// seen here): the ticket's own transaction checks the token again and refuses it.
    @Test func aTicketIsRefusedForATokenRevokedWhileItWasCached() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let driver = seed.drivers[0]
            #expect(try await server.request("GET", "/api/me", token: driver.token).status == 200)  // cached now
            let user = UserID(driver.id)
            try await server.store.write { tx in try tx.revokeTokens(of: user) }  // as another node would
            #expect(try await server.request("POST", "/api/ws-ticket", token: driver.token).status == 401)
        }
    }

    @Test func expiredTicketIs4001() async throws {
        try await TestServer.withRunning(configure: { $0.ticketLifetime = .seconds(1) }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let ticket = try #require(try await server.request("POST", "/api/ws-ticket", token: seed.drivers[0].token).object.string("ticket"))
            try await Task.sleep(for: .milliseconds(1200))
            let socket = try await TestSocket.open(port: server.port, query: "ticket=\(ticket)")
            #expect(await socket.closed() == 4001)
        }
    }

    @Test(arguments: ["token=nope", "ticket=nope", "", "token="])
    func badCredentialsAre4001(query: String) async throws {
        try await TestServer.withRunning { server in
            let socket = try await TestSocket.open(port: server.port, query: query)
            #expect(await socket.closed() == 4001)
        }
    }

    @Test func userWithoutACompanyIs4003() async throws {
        try await TestServer.withRunning { server in
            let hash = PasswordHasher(iterations: 1_000).hashNow("orphan-pass")
            _ = try await server.store.write { tx in
                try tx.insertUser(companyID: nil, role: .dispatcher, email: "orphan@example.com", name: "O", passwordHash: hash)
            }
            let login = try await server.request("POST", "/api/auth/login", json: ["email": "orphan@example.com", "password": "orphan-pass"])
            let token = try #require(login.object.string("token"))
            #expect(try await server.request("GET", "/api/me", token: token).status == 200)
            #expect(try await server.request("GET", "/api/orders/", token: token).status == 403)
            let socket = try await TestSocket.open(port: server.port, query: "token=\(token)")
            #expect(await socket.closed() == 4003)
        }
    }

    /// Past the user's request rate too: a user who may never connect is told so (4003, stop), not
    /// to try again later (1013).
    @Test func userWithoutACompanyIs4003AlsoPastTheirRate() async throws {
        try await TestServer.withRunning(configure: { $0.userRequestsPerSecond = 1; $0.userRequestBurst = 1 }) { server in
            let hash = PasswordHasher(iterations: 1_000).hashNow("orphan-pass")
            _ = try await server.store.write { tx in
                try tx.insertUser(companyID: nil, role: .dispatcher, email: "orphan@example.com", name: "O", passwordHash: hash)
            }
            let login = try await server.request("POST", "/api/auth/login", json: ["email": "orphan@example.com", "password": "orphan-pass"])
            let token = try #require(login.object.string("token"))
            for _ in 0..<2 { _ = try await server.request("GET", "/api/me", token: token) }  // the budget is spent
            let socket = try await TestSocket.open(port: server.port, query: "token=\(token)")
            #expect(await socket.closed() == 4003)
        }
    }

    @Test func revokedTokenIs4001() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let token = seed.drivers[0].token
            _ = try await server.request("POST", "/api/auth/logout", token: token)
            let socket = try await TestSocket.open(port: server.port, query: "token=\(token)")
            #expect(await socket.closed() == 4001)
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct LogoutTests {
    @Test func logoutClosesTheUsersLiveSocketsWith4001() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 0)
            let (mine, _) = try await server.connectedSocket(token: seed.drivers[0].token)
            let (theirs, _) = try await server.connectedSocket(token: seed.drivers[1].token)
            #expect(try await server.request("POST", "/api/auth/logout", token: seed.drivers[0].token).status == 204)
            #expect(await mine.closed() == 4001)
            await theirs.send(#"{"type":"ping"}"#)
            #expect(await theirs.next()?["type"] as? String == "pong")
        }
    }
}
