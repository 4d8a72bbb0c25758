import Foundation
import Testing
import WaybillAPI

/// `GET /api/orders/`: keyset pages with `Link: rel="next"`, filters, `ids=`, counts, bad input.
@Suite(.timeLimit(.minutes(1)))
struct OrderListAPITests {
    /// The URL of the `rel="next"` link, or `nil` on the last page.
    private static func nextURL(_ response: TestResponse) -> String? {
        guard let link = response.headers["link"] ?? response.headers["Link"] else { return nil }
        guard link.hasSuffix("rel=\"next\""), let open = link.firstIndex(of: "<"), let close = link.firstIndex(of: ">")
        else { return nil }
        return String(link[link.index(after: open)..<close])
    }

    private static func ids(_ response: TestResponse) -> [Int64] { response.array.compactMap { $0.int("id") } }

    @Test func pagesFollowTheLinkHeaderNewestFirstWithoutGapsOrRepeats() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 60)
            let boss = seed.dispatcherToken
            let all = seed.drivers.flatMap { $0.orderIDs ?? [] }.sorted(by: >)
            let first = try await server.request("GET", "/api/orders/", token: boss)
            #expect(first.status == 200)
            #expect(Self.ids(first) == Array(all.prefix(100)))  // default limit 100
            let next = try #require(Self.nextURL(first))
            #expect(next.contains("before=\(all[99])"))
            let second = try await server.request("GET", next, token: boss)
            #expect(Self.ids(second) == Array(all.dropFirst(100)))
            #expect(Self.nextURL(second) == nil)

            // A filter and the limit travel with the link; a new order does not shift later pages.
            let driver = seed.drivers[1]
            var url: String? = "/api/orders/?driver_id=\(driver.id)&limit=25"
            var seen: [Int64] = []
            var pages = 0
            while let current = url, pages < 10 {
                let page = try await server.request("GET", current, token: boss)
                #expect(page.status == 200)
                #expect(page.array.count <= 25)
                seen += Self.ids(page)
                url = Self.nextURL(page)
                if let url { #expect(url.contains("driver_id=\(driver.id)") && url.contains("limit=25")) }
                _ = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "late", "driver_id": driver.id])
                pages += 1
            }
            #expect(pages == 3)
            #expect(seen == (driver.orderIDs ?? []).sorted(by: >))
        }
    }

    /// Only the list's own arguments travel with the link: a token a client put in the query by
    /// mistake is not echoed into a header that proxies log (found by a review, 2026-12-03).
    @Test func theNextLinkCarriesOnlyTheListsArguments() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 3)
            let url = "/api/orders/?limit=1&token=\(seed.dispatcherToken)&status=new&status=assigned&x=1"
            let first = try await server.request("GET", url, token: seed.dispatcherToken)
            #expect(first.status == 200)
            let next = try #require(Self.nextURL(first))
            #expect(!next.contains("token") && !next.contains(seed.dispatcherToken) && !next.contains("x=1"))
            #expect(next.contains("limit=1") && next.contains("status=new") && next.contains("status=assigned"))
        }
    }

    @Test func eachPageHasItsOwnETagAnd304() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 5)
            let boss = seed.dispatcherToken
            let first = try await server.request("GET", "/api/orders/?limit=2", token: boss)
            let second = try await server.request("GET", try #require(Self.nextURL(first)), token: boss)
            let firstTag = try #require(first.headers["etag"]), secondTag = try #require(second.headers["etag"])
            #expect(firstTag != secondTag)
            let again = try await server.request("GET", "/api/orders/?limit=2", token: boss, headers: ["If-None-Match": firstTag])
            #expect(again.status == 304)
            #expect(Self.nextURL(again) == Self.nextURL(first))
            // A new order changes the first page but not the second one (keyset: `before` is fixed).
            _ = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "new"])
            let changed = try await server.request("GET", "/api/orders/?limit=2", token: boss, headers: ["If-None-Match": firstTag])
            #expect(changed.status == 200)
            let stable = try await server.request(
                "GET", try #require(Self.nextURL(first)), token: boss, headers: ["If-None-Match": secondTag])
            #expect(stable.status == 304)
        }
    }

    @Test func filtersActiveStatusTextAndUpdatedAfter() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 4)
            let boss = seed.dispatcherToken, driver = seed.drivers[0]
            let ids = try #require(driver.orderIDs)
            let before = Date()
            try await Task.sleep(for: .milliseconds(10))  // updated_after is strict and stored in milliseconds
            _ = try await server.request("POST", "/api/orders/\(ids[0])/status", token: boss, json: ["status": "cancelled"])
            let special = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "Crates 50%_off"])
            let specialID = try #require(special.object.int("id"))

            let active = try await server.request("GET", "/api/orders/?active=true", token: boss)
            #expect(Self.ids(active) == [specialID] + ids.dropFirst().sorted(by: >))
            let cancelled = try await server.request("GET", "/api/orders/?status=cancelled", token: boss)
            #expect(Self.ids(cancelled) == [ids[0]])
            let either = try await server.request("GET", "/api/orders/?status=cancelled&status=new", token: boss)
            #expect(Self.ids(either) == [specialID, ids[0]])
            let text = try await server.request("GET", "/api/orders/?q=50%25_", token: boss)
            #expect(Self.ids(text) == [specialID])
            let number = try #require(special.object.string("number"))
            let byNumber = try await server.request(
                "GET", "/api/orders/?q=\(number.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")",
                token: boss)
            #expect(Self.ids(byNumber) == [specialID])
            let format = ISO8601DateFormatter()
            format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let stamp = format.string(from: before)
            let recent = try await server.request("GET", "/api/orders/?updated_after=\(stamp)", token: boss)
            #expect(Set(Self.ids(recent)) == [specialID, ids[0]])
        }
    }

    @Test func idsReturnOnlyWhatTheCallerMaySee() async throws {
        try await TestServer.withRunning { server in
            let acme = try await server.seed(drivers: 2, orders: 2)
            let globex = try await server.seed(drivers: 1, orders: 1, company: "Globex")
            let mine = try #require(acme.drivers[0].orderIDs), theirs = try #require(acme.drivers[1].orderIDs)
            let foreign = try #require(globex.drivers[0].orderIDs)
            try #require(
                try await server.request("DELETE", "/api/orders/\(theirs[1])", token: acme.dispatcherToken).status == 204)
            let asked = (mine + theirs + foreign + [999_999]).map(String.init).joined(separator: ",")
            let boss = try await server.request("GET", "/api/orders/?ids=\(asked)", token: acme.dispatcherToken)
            #expect(boss.status == 200)
            #expect(Self.ids(boss) == [theirs[0]] + mine.sorted(by: >))
            let driver = try await server.request("GET", "/api/orders/?ids=\(asked)", token: acme.drivers[0].token)
            #expect(Self.ids(driver) == mine.sorted(by: >))
            // A driver cannot widen the scope with driver_id either.
            let widened = try await server.request(
                "GET", "/api/orders/?driver_id=\(acme.drivers[1].id)", token: acme.drivers[0].token)
            #expect(widened.status == 200 && widened.array.isEmpty)
            let fifty = (1...100).map(String.init).joined(separator: ",")
            #expect(try await server.request("GET", "/api/orders/?ids=\(fifty)", token: acme.dispatcherToken).status == 200)
        }
    }

    @Test(arguments: [
        "limit=0", "limit=501", "limit=ten", "status=lost", "status=new,", "ids=1,x", "ids=0",
        "ids=" + (1...101).map(String.init).joined(separator: ","), "active=maybe", "updated_after=yesterday",
        "updated_after=2026-02-30T00:00:00Z",
        "before=-4", "driver_id=abc", "q=" + String(repeating: "x", count: 101),
    ])
    func badValuesAreA400NamingTheArgument(_ query: String) async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let answer = try await server.request("GET", "/api/orders/?\(query)", token: seed.dispatcherToken)
            #expect(answer.status == 400)
            #expect(answer.errorCode == "invalid_field")
            let name = String(query.prefix { $0 != "=" })
            #expect((answer.object.string("message") ?? "").contains(name))
        }
    }

    @Test func countsPerStatusForDispatcherAndDriver() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 3)
            let boss = seed.dispatcherToken
            let first = try #require(seed.drivers[0].orderIDs?.first)
            _ = try await server.request("POST", "/api/orders/\(first)/status", token: boss, json: ["status": "cancelled"])
            _ = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "unassigned"])
            let all = try await server.request("GET", "/api/orders/counts", token: boss)
            #expect(all.status == 200)
            #expect(all.object.int("assigned") == 5 && all.object.int("cancelled") == 1 && all.object.int("new") == 1)
            #expect(all.object.int("completed") == 0)
            let driver = try await server.request("GET", "/api/orders/counts", token: seed.drivers[0].token)
            #expect(driver.object.int("assigned") == 2 && driver.object.int("cancelled") == 1)
            #expect(driver.object.int("new") == 0)
        }
    }
}
