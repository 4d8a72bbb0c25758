"""Fleet board (stream=fleet): one card per driver, updated live."""
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import expect

from conftest import LIVE_TIMEOUT_MS, ListRequests, login_as_dispatcher, screenshot, wait_until


def card(page, key):
    return page.locator(f'#fleet-grid article[data-driver-id="{key}"]')


def named(url):
    """The order ids an `ids=` list request names."""
    values = parse_qs(urlparse(url).query).get("ids", [""])[0]
    return {int(value) for value in values.split(",") if value}


def full_loads(page):
    return [url for url in page.recorder.urls if "/api/orders/?" in url and "active=true" in url]


def wait_for_start_up_loads(page):
    """The board's first load and the socket's refetch after `connected` (two full loads)."""
    assert wait_until(lambda: len(full_loads(page)) >= 2, timeout=10), page.recorder.urls
    page.wait_for_timeout(300)  # their answers have been rendered


def test_fleet_board_has_a_card_per_driver_and_follows_changes(page, server, api):
    login_as_dispatcher(page, server)
    page.get_by_role("link", name="Fleet board").click()
    expect(page.locator("#fleet-heading")).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    assert any("stream=fleet" in url for url in page.recorder.websocket_urls)
    drivers = api.ok("GET", "/api/drivers/")
    for driver in drivers:
        expect(card(page, driver["id"])).to_be_visible()
        expect(card(page, driver["id"]).get_by_role("heading")).to_have_text(driver["name"] or driver["email"])
    seeded = server.drivers[0]
    for order_id in seeded["order_ids"]:
        order = api.ok("GET", f"/api/orders/{order_id}/")
        if order["driver_id"] == seeded["id"] and order["status"] not in ("completed", "cancelled"):
            expect(card(page, seeded["id"]).locator(f'li[data-order-id="{order_id}"]')).to_be_visible()
    screenshot(page, "fleet")

    # Another client creates and then reassigns an order: it moves between cards, no reload,
    # and each burst fetches the orders it names (`ids=`), never the whole active set again.
    wait_for_start_up_loads(page)
    requests = ListRequests(page)
    a, b = server.drivers[1], server.drivers[2]
    order = api.create_order("Fleet mover", driver_id=a["id"])
    item = f'li[data-order-id="{order["id"]}"]'
    expect(card(page, a["id"]).locator(item)).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    api.ok("POST", f"/api/orders/{order['id']}/assign", {"driver_id": b["id"]})
    expect(card(page, b["id"]).locator(item)).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(card(page, a["id"]).locator(item)).to_have_count(0)
    api.ok("POST", f"/api/orders/{order['id']}/status", {"status": "cancelled"})
    expect(card(page, b["id"]).locator(item)).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    assert wait_until(lambda: any(order["id"] in named(url) for url in requests.by_ids)), requests.urls
    assert requests.pages == [], requests.urls

    # A link on a card opens the order on the orders page.
    first = card(page, seeded["id"]).get_by_role("link").first
    first.click()
    expect(page.locator(".facts")).to_be_visible()
    # Opened on a freshly mounted page: the driver select still shows the order's driver.
    expect(page.locator("#assign-driver")).to_have_value(str(seeded["id"]))


def test_a_failed_fetch_makes_the_next_burst_reload_the_whole_board(page, server, api):
    login_as_dispatcher(page, server)
    page.goto("/#/fleet")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    wait_for_start_up_loads(page)
    a = server.drivers[1]
    failed = []
    failing = {"on": True}

    # Every order read fails while `failing` is on: the event's fetch and the feed's own retries of
    # it (a 503 is retried after a backoff), so only the next burst can bring the order.
    def fail_while_on(route):
        if not failing["on"]:
            return route.continue_()
        failed.append(route.request.url)
        return route.fulfill(status=503, content_type="application/json",
                             body='{"error":{"code":"store_unavailable","message":"try again"}}')

    page.route("**/api/orders/?*", fail_while_on)
    requests = ListRequests(page)
    lost = api.create_order("Fleet lost fetch", driver_id=a["id"])
    expect(page.locator("#fleet-error")).to_contain_text("Could not refresh the fleet", timeout=LIVE_TIMEOUT_MS)
    assert failed and lost["id"] in named(failed[0]), failed
    expect(card(page, a["id"]).locator(f'li[data-order-id="{lost["id"]}"]')).to_have_count(0)
    failing["on"] = False

    # The next burst names another order only, and still brings the first one: a full load.
    other = api.create_order("Fleet next burst", driver_id=a["id"])
    expect(card(page, a["id"]).locator(f'li[data-order-id="{other["id"]}"]')).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(card(page, a["id"]).locator(f'li[data-order-id="{lost["id"]}"]')).to_be_visible()
    expect(page.locator("#fleet-error")).to_have_text("")
    assert len(requests.pages) >= 1, requests.urls


def test_panel_is_usable_on_a_tablet(page_factory, server):
    page = page_factory(viewport={"width": 820, "height": 1180})
    login_as_dispatcher(page, server)
    order_id = server.drivers[0]["order_ids"][0]
    page.goto(f"/#/orders/{order_id}")
    expect(page.locator(".facts")).to_be_visible()
    # No horizontal scrolling of the whole page.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "tablet-orders")
    page.goto("/#/fleet")
    expect(page.locator("#fleet-grid article").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "tablet-fleet")
