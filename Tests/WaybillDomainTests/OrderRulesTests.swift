import Foundation
import Testing
import WaybillDomain

struct OrderRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let driver = Actor(userID: 7, companyID: 1, role: .driver)
    let dispatcher = Actor(userID: 1, companyID: 1, role: .dispatcher)

    func order(status: OrderStatus = .accepted) -> Order {
        Order(
            id: 1, companyID: 1, number: "2026/11/0001", status: status, driverID: 7, title: "t",
            stages: [
                Stage(id: 10, position: 1, kind: .pickup, address: "A"),
                Stage(id: 11, position: 2, kind: .delivery, address: "B"),
            ], createdAt: now, updatedAt: now)
    }

    @Test func assignedDriverCompletesAStage() throws {
        let done = try order().completingStage(11, by: driver, at: now)
        #expect(done.stages[1].completedAt == now)
        #expect(done.stages[0].completedAt == nil)
        #expect(done.version == 2)
    }

    /// A write whose clock read is older than the order's stamp (it waited for the row, or its node's
    /// clock is behind) still moves `updatedAt` forward, so `updated_after=` finds every version.
    @Test func updatedAtNeverGoesBackwards() throws {
        let earlier = now.addingTimeInterval(-2)
        let changed = try order().completingStage(10, by: driver, at: earlier)
        #expect(changed.version == 2)
        #expect(changed.updatedAt > now)
        let again = try changed.completingStage(11, by: driver, at: earlier)
        #expect(again.updatedAt > changed.updatedAt)
        let later = now.addingTimeInterval(60)
        #expect(try again.patched(OrderPatch(notes: "n"), by: dispatcher, at: later)?.updatedAt == later)
    }

    @Test func aStageCannotBeCompletedTwice() throws {
        let done = try order().completingStage(10, by: driver, at: now)
        #expect(throws: OrderRuleViolation.stageAlreadyCompleted(10)) { try done.completingStage(10, by: driver, at: now) }
    }

    @Test func onlyTheAssignedDriverCompletesStages() {
        #expect(throws: OrderRuleViolation.roleNotAllowed(.dispatcher)) {
            try order().completingStage(10, by: dispatcher, at: now)
        }
        #expect(throws: OrderRuleViolation.notAssignedDriver) {
            try order().completingStage(10, by: Actor(userID: 8, companyID: 1, role: .driver), at: now)
        }
        #expect(throws: OrderRuleViolation.stageNotFound(99)) { try order().completingStage(99, by: driver, at: now) }
        #expect(throws: OrderRuleViolation.orderClosed(.cancelled)) {
            try order(status: .cancelled).completingStage(10, by: driver, at: now)
        }
    }

    @Test func patchKeepsCompletionOfListedStagesAndRenumbers() throws {
        let done = try order().completingStage(11, by: driver, at: now)
        let patch = OrderPatch(
            title: "new", stages: [Stage(id: 11, position: 9, kind: .delivery, address: "B2"), Stage(position: 5, kind: .stop, address: "C")])
        let patched = try #require(try done.patched(patch, by: dispatcher, at: now))
        #expect(patched.title == "new")
        #expect(patched.stages.map(\.position) == [1, 2])
        #expect(patched.stages[0].id == 11 && patched.stages[0].completedAt == now && patched.stages[0].address == "B2")
        #expect(patched.stages[1].id == nil && patched.stages[1].completedAt == nil)
    }

    /// A patch that names no field is no new version (nor an event): a driver's queued action
    /// holding the current version would otherwise be refused with 412 for nothing. A field
    /// written with its own value is still an edit.
    @Test func aPatchThatNamesNoFieldIsNoChange() throws {
        let current = order()
        #expect(try current.patched(OrderPatch(), by: dispatcher, at: now) == nil)
        #expect(try current.patched(OrderPatch(title: current.title), by: dispatcher, at: now)?.version == current.version + 1)
        #expect(try current.patched(OrderPatch(title: "other"), by: dispatcher, at: now)?.version == current.version + 1)
    }

    /// A finished order keeps its stages (its delivery record) but may get its title and notes corrected.
    @Test func aFinishedOrderKeepsItsStages() throws {
        for status in [OrderStatus.completed, .cancelled] {
            let closed = order(status: status)
            #expect(throws: OrderRuleViolation.orderClosed(status)) {
                try closed.patched(OrderPatch(stages: []), by: dispatcher, at: now)
            }
            #expect(try closed.patched(OrderPatch(notes: "signed by J."), by: dispatcher, at: now)?.notes == "signed by J.")
            #expect(try closed.patched(OrderPatch(stages: closed.stages), by: dispatcher, at: now) != nil, "sent back unchanged")
        }
    }

    /// Documents: a completed order still takes them (a delivery note after the last stage), a
    /// cancelled one does not, and one order holds at most `Order.maxDocuments`.
    @Test func documentsOnFinishedAndFullOrders() throws {
        let note = Document(name: "note", kind: "pod", createdAt: now)
        #expect(try order(status: .completed).attaching(note, by: driver, at: now).documents.count == 1)
        #expect(throws: OrderRuleViolation.orderClosed(.cancelled)) {
            try order(status: .cancelled).attaching(note, by: driver, at: now)
        }
        var full = order()
        full.documents = Array(repeating: note, count: Order.maxDocuments - 1)
        full = try full.attaching(note, by: dispatcher, at: now)
        #expect(throws: OrderRuleViolation.tooManyDocuments) { try full.attaching(note, by: dispatcher, at: now) }
    }

    @Test func driversCannotPatchOrDelete() {
        #expect(throws: OrderRuleViolation.roleNotAllowed(.driver)) { try order().patched(OrderPatch(title: "x"), by: driver, at: now) }
        #expect(throws: OrderRuleViolation.roleNotAllowed(.driver)) { try order().checkDeletable(by: driver) }
    }

    @Test func visibilityFollowsCompanyAndAssignment() {
        #expect(dispatcher.canSee(order()))
        #expect(driver.canSee(order()))
        #expect(!Actor(userID: 8, companyID: 1, role: .driver).canSee(order()))
        #expect(!Actor(userID: 1, companyID: 2, role: .dispatcher).canSee(order()))
    }

    @Test func orderNumbersArePaddedPerMonth() {
        #expect(OrderNumber.format(year: 2026, month: 11, sequence: 42) == "2026/11/0042")
        #expect(OrderNumber.format(year: 2026, month: 1, sequence: 12345) == "2026/01/12345")
        let period = OrderNumber.period(of: Date(timeIntervalSince1970: 1_796_000_000))
        #expect(period.year == 2026 && period.month == 11)
    }
}
