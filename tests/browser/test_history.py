"""The list at any history length: one page on screen, paging, search, counts, and row-level refresh."""
import re
import uuid

from playwright.sync_api import expect

from conftest import (
    LIVE_TIMEOUT_MS, ListRequests, login_as_dispatcher, row, screenshot, wait_for_board_start_up_loads, wait_until,
)


def test_the_history_is_paged_and_searchable(page, server, api):
    tag = f"Hist{uuid.uuid4().hex[:6]}"
    created = [api.create_order(f"{tag} load {n}")["id"] for n in range(57)]
    login_as_dispatcher(page, server)
    # No view renders more than one page of rows.
    assert page.locator("#orders-table tbody tr").count() <= 50
    page.locator("#filter-status").select_option("all")
    # The box takes no more than the server accepts (100 characters; a longer `q` is a 400).
    page.locator("#filter-q").press_sequentially("x" * 101)
    expect(page.locator("#filter-q")).to_have_value("x" * 100)
    page.locator("#filter-q").fill(tag)
    page.locator("#filter-q").press("Enter")
    newest_first = sorted(created, reverse=True)
    expect(page.locator("#orders-table tbody tr")).to_have_count(50)
    expect(row(page, newest_first[0])).to_be_visible()
    expect(page.locator("#page-newer")).to_be_disabled()
    assert "q=" in page.url and "status=all" in page.url
    screenshot(page, "history-page-1")

    page.locator("#page-older").click()
    expect(page.locator("#orders-table tbody tr")).to_have_count(7)
    for order_id in newest_first[50:]:
        expect(row(page, order_id)).to_be_visible()
    expect(page.locator("#page-older")).to_be_disabled()
    expect(page.locator("#orders-count")).to_contain_text("Page 2")

    page.locator("#page-newer").click()
    expect(page.locator("#orders-table tbody tr")).to_have_count(50)
    expect(row(page, newest_first[0])).to_be_visible()

    # Search by number as well as by title.
    number = api.ok("GET", f"/api/orders/{created[3]}/")["number"]
    page.locator("#filter-q").fill(number)
    page.locator("#filter-q").press("Enter")
    expect(page.locator("#orders-table tbody tr")).to_have_count(1)
    expect(row(page, created[3])).to_be_visible()


def test_counts_per_status_follow_changes(page, server, api):
    login_as_dispatcher(page, server)
    counts = api.ok("GET", "/api/orders/counts")
    expect(page.locator('#status-counts li[data-status="cancelled"] .count-value')).to_have_text(str(counts["cancelled"]))
    order = api.create_order("Counted")
    api.ok("POST", f"/api/orders/{order['id']}/status", {"status": "cancelled"})
    expect(page.locator('#status-counts li[data-status="cancelled"] .count-value')).to_have_text(
        str(counts["cancelled"] + 1), timeout=LIVE_TIMEOUT_MS)


def test_an_event_for_a_visible_row_fetches_that_row_not_the_page(page, server, api):
    order = api.create_order("Row level", driver_id=server.drivers[0]["id"])
    login_as_dispatcher(page, server)
    expect(row(page, order["id"])).to_be_visible()
    wait_for_board_start_up_loads(page)
    requests = ListRequests(page)

    api.ok("POST", f"/api/orders/{order['id']}/status", {"status": "accepted"})
    expect(row(page, order["id"]).locator("td").nth(1)).to_have_text("Accepted", timeout=LIVE_TIMEOUT_MS)
    assert any(re.search(rf"ids=(\d+,)*{order['id']}(,|$)", url) for url in requests.by_ids), requests.urls
    assert requests.pages == [], requests.urls

    # An edit moves no order between statuses: the row is refetched, the counts are not.
    counts_before = len(requests.counts)
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"title": "Row level (renamed)"})
    expect(row(page, order["id"]).locator("td").nth(0)).to_have_text("Row level (renamed)", timeout=LIVE_TIMEOUT_MS)
    page.wait_for_timeout(300)
    assert len(requests.counts) == counts_before, requests.urls
    assert requests.pages == [], requests.urls

    # Completing it moves it out of the active view: now the page itself is refetched.
    api.ok("POST", f"/api/orders/{order['id']}/status", {"status": "in_progress"})
    api.ok("POST", f"/api/orders/{order['id']}/status", {"status": "completed"})
    expect(row(page, order["id"])).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    assert wait_until(lambda: len(requests.pages) >= 1), requests.urls


def run_rules(page, script):
    return page.evaluate(f"async () => {{ const rules = await import('/assets/list-page.js'); {script} }}")


def test_the_refresh_rule_on_plain_values(page, server):
    page.goto("/")
    result = run_rules(page, """
      const rows = [{ id: 90, status: 'assigned', number: '2026/11/0090', title: 'A', driver_id: 1 },
                    { id: 80, status: 'new', number: '2026/11/0080', title: 'B', driver_id: null }];
      const first = { before: null, rows, hasMore: true };
      const later = { before: 100, rows, hasMore: true };
      const signal = (ids, extra = {}) => ({ all: false, orderIds: new Set(ids), deletedIds: new Set(extra.deleted ?? []),
                                             createdIds: new Set(extra.created ?? []) });
      const filters = { status: '', driver: '', q: '' };
      return {
        reconnect: rules.planRefresh({ ...signal([]), all: true }, first),
        createdOnFirst: rules.planRefresh(signal([120], { created: [120] }), first),
        createdOnLater: rules.planRefresh(signal([120], { created: [120] }), later),
        visibleUpdate: rules.planRefresh(signal([90, 5]), first),
        visibleDeleted: rules.planRefresh(signal([80], { deleted: [80] }), first),
        tooMany: rules.planRefresh(signal(Array.from({ length: 101 }, (_, i) => 81 + i)), first),
        stillMatches: rules.membershipChanged([90], [{ ...rows[0], status: 'accepted' }], first, filters),
        finished: rules.membershipChanged([90], [{ ...rows[0], status: 'completed' }], first, filters),
        gone: rules.membershipChanged([90], [], first, filters),
        joined: rules.membershipChanged([85], [{ id: 85, status: 'new', number: 'x', title: 'y' }], first, filters),
        olderThanPage: rules.membershipChanged([5], [{ id: 5, status: 'new', number: 'x', title: 'y' }], first, filters),
        active: rules.serverFilters(filters),
        history: rules.serverFilters({ status: 'all', driver: '3', q: ' 50% ' }),
      };
    """)
    assert result["reconnect"] == {"page": True}
    assert result["createdOnFirst"] == {"page": True}
    assert result["createdOnLater"] == {"ids": []}  # a new order is newer than every later page
    assert result["visibleUpdate"] == {"ids": [90]}  # 5 is older than the page's last row: no fetch at all
    assert result["visibleDeleted"] == {"page": True}
    assert result["tooMany"] == {"page": True}
    assert result["stillMatches"] is False
    assert result["finished"] is True and result["gone"] is True and result["joined"] is True
    assert result["olderThanPage"] is False
    assert result["active"] == {"active": "true"}
    assert result["history"] == {"driver_id": "3", "q": "50%"}


def test_a_search_typed_just_before_leaving_the_page_does_not_follow_the_user(page, server):
    """Typing in Search and switching to the Fleet board within the search's 300 ms pause: the
    search must not run after the page is left (it rewrote the address to the orders page, so
    Reload landed there; found by a review)."""
    login_as_dispatcher(page, server)
    page.locator("#filter-q").fill("left behind")
    page.evaluate("location.hash = '#/fleet'")
    expect(page.locator("#fleet-grid")).to_be_visible()
    page.wait_for_timeout(700)  # past the search's pause
    assert page.evaluate("location.hash") == "#/fleet"
