public import WaybillStorage
import Dispatch
public import Foundation
import Synchronization
import WaybillDomain

/// Creates a company with a dispatcher, drivers and assigned orders — for demos, tests and the
/// benchmark harness (`waybill seed`). Orders go through the normal write path, so their
/// `order_created` events are in the outbox like any other.
public struct Seeder: Sendable {
    /// Who to create. A `nil` password = a fresh random password per user.
    public struct Plan: Sendable {
        public var companyName: String
        public var drivers: Int
        public var ordersPerDriver: Int
        public var emailDomain: String?
        public var dispatcherPassword: String?
        public var driverPassword: String?
        /// Completed and cancelled orders per driver, spread over the past months (see `Seeder+History`).
        public var finishedPerDriver: Int
        public init(
            companyName: String, drivers: Int, ordersPerDriver: Int, emailDomain: String? = nil,
            dispatcherPassword: String? = nil, driverPassword: String? = nil, finishedPerDriver: Int = 0
        ) {
            self.finishedPerDriver = finishedPerDriver
            self.companyName = companyName
            self.drivers = drivers
            self.ordersPerDriver = ordersPerDriver
            self.emailDomain = emailDomain
            self.dispatcherPassword = dispatcherPassword
            self.driverPassword = driverPassword
        }
    }

    /// The file format the benchmark harness reads.
    public struct Result: Codable, Sendable {
        public struct Account: Codable, Sendable {
            public var id: Int64
            public var email: String
            public var password: String
            public var token: String
            public var orderIDs: [Int64]?
            enum CodingKeys: String, CodingKey { case id, email, password, token, orderIDs = "order_ids" }
        }
        public var companyID: Int64
        public var dispatcherToken: String
        public var dispatcher: Account
        public var drivers: [Account]
        enum CodingKeys: String, CodingKey {
            case companyID = "company_id", dispatcherToken = "dispatcher_token", dispatcher, drivers
        }

        public func json() throws -> Data {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            return try encoder.encode(self)
        }
    }

    let store: any OrderStore
    private let hasher: PasswordHasher
    private let clock: any WallClock

    public init(store: any OrderStore, passwordIterations: Int = PasswordHasher.defaultIterations, clock: any WallClock = SystemWallClock()) {
        self.store = store
        self.hasher = PasswordHasher(iterations: passwordIterations)
        self.clock = clock
    }

    public func seed(_ plan: Plan) async throws -> Result {
        // The dispatcher first, then the drivers.
        let roles = [Role.dispatcher] + Array(repeating: Role.driver, count: plan.drivers)
        let passwords = roles.map { role in
            (role == .dispatcher ? plan.dispatcherPassword : plan.driverPassword) ?? String(Secret.generate().value.prefix(16))
        }
        let hashes = hashAll(passwords)
        let now = clock.now()
        // The company and its people in one transaction: a seed stopped between the two (Ctrl-C
        // during `waybill demo`'s first start) left an empty company, and every later start then
        // tried again (found by a review, 2026-12-05).
        let (company, accounts) = try await store.write { tx in
            let company = try tx.insertCompany(name: plan.companyName)
            let domain = plan.emailDomain ?? "company\(company.id).example.com"
            let people = [("dispatcher@\(domain)", Role.dispatcher, "Dispatcher")]
                + (0..<plan.drivers).map { ("driver\($0 + 1)@\(domain)", Role.driver, "Driver \($0 + 1)") }
            let accounts = try zip(people, zip(passwords, hashes)).map { person, secret in
                let user = try tx.insertUser(
                    companyID: company.id, role: person.1, email: person.0, name: person.2, passwordHash: secret.1)
                let token = Secret.generate()
                // Seeded tokens expire like login tokens (30 days): none lives forever.
                try tx.insertToken(hash: token.hash, for: user.id, createdAt: now, expiresAt: now.addingTimeInterval(30 * 86_400))
                return Result.Account(id: user.id.rawValue, email: user.email, password: secret.0, token: token.value)
            }
            return (company, accounts)
        }
        // History first, so ids keep following creation time (the list is newest first by id).
        try await seedHistory(
            perDriver: plan.finishedPerDriver, drivers: accounts.dropFirst().map { UserID($0.id) }, company: company.id,
            now: now)
        let dispatcher = Actor(userID: UserID(accounts[0].id), companyID: company.id, role: .dispatcher)
        let orders = OrderService(store: store, clock: clock) { _ in }
        var drivers = Array(accounts.dropFirst())
        for index in drivers.indices {
            drivers[index].orderIDs = try await createOrders(plan.ordersPerDriver, for: drivers[index], by: dispatcher, orders)
        }
        return Result(
            companyID: company.id.rawValue, dispatcherToken: accounts[0].token, dispatcher: accounts[0], drivers: drivers)
    }

    private func createOrders(_ count: Int, for driver: Result.Account, by dispatcher: Actor, _ orders: OrderService) async throws -> [Int64] {
        var ids: [Int64] = []
        for n in 0..<count {
            let request = CreateOrderRequest(
                title: "Delivery \(n + 1) for \(driver.email.split(separator: "@")[0])", notes: "Seeded order",
                driverID: driver.id,
                stages: [
                    StageRequest(kind: .pickup, address: "Depot \(n % 5 + 1), Harbour Road"),
                    StageRequest(kind: .delivery, address: "\(10 + n) Market Street"),
                ])
            ids.append(try await orders.run(orders.create(request, by: dispatcher)).id?.rawValue ?? 0)
        }
        return ids
    }

    /// Slow hashes spread over every core.
    private func hashAll(_ passwords: [String]) -> [String] {
        let results = Mutex([String](repeating: "", count: passwords.count))
        let hasher = self.hasher
        DispatchQueue.concurrentPerform(iterations: passwords.count) { i in
            let hash = hasher.hashNow(passwords[i])
            results.withLock { $0[i] = hash }
        }
        return results.withLock { $0 }
    }
}
