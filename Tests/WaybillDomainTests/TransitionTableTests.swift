import Foundation
import Testing
import WaybillDomain

/// Every cell of SPEC §1's table: each status × each target through `POST /status`, as both roles.
struct TransitionTableTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let dispatcher = Actor(userID: 1, companyID: 1, role: .dispatcher)
    static let driver = Actor(userID: 7, companyID: 1, role: .driver)
    static let otherDriver = Actor(userID: 8, companyID: 1, role: .driver)

    static func order(_ status: OrderStatus, driver: UserID? = 7) -> Order {
        Order(
            id: 42, companyID: 1, number: "2026/11/0042", status: status, driverID: status == .new ? nil : driver,
            title: "Load", createdAt: now, updatedAt: now.addingTimeInterval(-60), version: 3)
    }

    /// The moves `POST /status` allows, by role.
    static let allowedForDispatcher: Set<[OrderStatus]> = [
        [.assigned, .accepted], [.accepted, .inProgress], [.inProgress, .completed],
        [.new, .cancelled], [.assigned, .cancelled], [.accepted, .cancelled], [.inProgress, .cancelled],
    ]
    static let allowedForDriver: Set<[OrderStatus]> = [
        [.assigned, .accepted], [.accepted, .inProgress], [.inProgress, .completed],
    ]

    static let allPairs: [(OrderStatus, OrderStatus)] = OrderStatus.allCases.flatMap { from in
        OrderStatus.allCases.map { (from, $0) }
    }

    @Test(arguments: allPairs)
    func dispatcherStatusMove(from: OrderStatus, to: OrderStatus) throws {
        let result = Result { try Self.order(from).transitioned(to: to, by: Self.dispatcher, at: Self.now) }
        if Self.allowedForDispatcher.contains([from, to]) {
            let moved = try result.get()
            #expect(moved.status == to)
            #expect(moved.version == 4)
            #expect(moved.updatedAt == Self.now)
        } else {
            #expect(throws: OrderRuleViolation.invalidTransition(from: from, to: to)) { try result.get() }
        }
    }

    @Test(arguments: allPairs)
    func assignedDriverStatusMove(from: OrderStatus, to: OrderStatus) throws {
        let result = Result { try Self.order(from).transitioned(to: to, by: Self.driver, at: Self.now) }
        if Self.allowedForDriver.contains([from, to]) {
            #expect(try result.get().status == to)
        } else if to == .cancelled {
            #expect(throws: OrderRuleViolation.roleNotAllowed(.driver)) { try result.get() }
        } else if from == .new {
            // A new order has no driver: this driver is not its driver.
            #expect(throws: OrderRuleViolation.notAssignedDriver) { try result.get() }
        } else {
            #expect(throws: OrderRuleViolation.invalidTransition(from: from, to: to)) { try result.get() }
        }
    }

    @Test func driverCannotMoveAnotherDriversOrder() {
        #expect(throws: OrderRuleViolation.notAssignedDriver) {
            try Self.order(.assigned).transitioned(to: .accepted, by: Self.otherDriver, at: Self.now)
        }
    }

    @Test func assigningANewOrderMakesItAssigned() throws {
        let assigned = try #require(try Self.order(.new).assigning(9, by: Self.dispatcher, at: Self.now))
        #expect(assigned.status == .assigned)
        #expect(assigned.driverID == 9)
        #expect(assigned.version == 4)
    }

    @Test func reassigningAnAssignedOrderChangesTheDriver() throws {
        let reassigned = try #require(try Self.order(.assigned).assigning(9, by: Self.dispatcher, at: Self.now))
        #expect(reassigned.driverID == 9)
        #expect(reassigned.status == .assigned)
    }

    @Test func assigningTheSameDriverAgainChangesNothing() throws {
        #expect(try Self.order(.assigned).assigning(7, by: Self.dispatcher, at: Self.now) == nil)
    }

    @Test(arguments: [OrderStatus.accepted, .inProgress, .completed, .cancelled])
    func assigningIsRefusedOnceWorkStarted(status: OrderStatus) {
        #expect(throws: OrderRuleViolation.invalidTransition(from: status, to: .assigned)) {
            try Self.order(status).assigning(9, by: Self.dispatcher, at: Self.now)
        }
    }

    @Test func driversCannotAssignOrUnassign() {
        #expect(throws: OrderRuleViolation.roleNotAllowed(.driver)) {
            try Self.order(.new).assigning(7, by: Self.driver, at: Self.now)
        }
        #expect(throws: OrderRuleViolation.roleNotAllowed(.driver)) {
            try Self.order(.assigned).unassigning(by: Self.driver, at: Self.now)
        }
    }

    @Test func unassigningAnAssignedOrderMakesItNew() throws {
        let order = try Self.order(.assigned).unassigning(by: Self.dispatcher, at: Self.now)
        #expect(order.status == .new)
        #expect(order.driverID == nil)
    }

    @Test(arguments: [OrderStatus.new, .accepted, .inProgress, .completed, .cancelled])
    func unassigningIsRefusedUnlessAssigned(status: OrderStatus) {
        #expect(throws: OrderRuleViolation.invalidTransition(from: status, to: .new)) {
            try Self.order(status).unassigning(by: Self.dispatcher, at: Self.now)
        }
    }
}
