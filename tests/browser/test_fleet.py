"""Fleet board (stream=fleet): one card per driver, updated live."""
from playwright.sync_api import expect

from conftest import LIVE_TIMEOUT_MS, ListRequests, login_as_dispatcher, screenshot, wait_until


def card(page, key):
    return page.locator(f'#fleet-grid article[data-driver-id="{key}"]')


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
    page.wait_for_timeout(600)  # the start-up loads (the board, the socket's connect refetch) are done
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
    assert wait_until(lambda: any(f"ids={order['id']}" in url for url in requests.by_ids)), requests.urls
    assert requests.pages == [], requests.urls

    # A link on a card opens the order on the orders page.
    first = card(page, seeded["id"]).get_by_role("link").first
    first.click()
    expect(page.locator(".facts")).to_be_visible()
    # Opened on a freshly mounted page: the driver select still shows the order's driver.
    expect(page.locator("#assign-driver")).to_have_value(str(seeded["id"]))


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
