"""Read receipts (SPEC §2 "Receipts", §4 `seen`): whether the driver's device shows the current version."""
import json
import re

from playwright.sync_api import expect

from conftest import LIVE_TIMEOUT_MS, login_as_dispatcher, row, screenshot
from test_orders import driver_socket

SEEN = re.compile(r"^Seen \d\d:\d\d:\d\d$")
NOT_SEEN = re.compile(r"^Not seen yet — changed \d\d:\d\d:\d\d$")


def send_seen(ws, *orders):
    """What the driver's phone sends after it has shown these versions."""
    ws.send(json.dumps({"type": "seen", "orders": [{"id": o["id"], "version": o["version"]} for o in orders]}))


def test_list_and_detail_show_whether_the_driver_has_seen_the_current_version(page, server, api):
    driver = server.drivers[0]
    order = api.create_order("Receipt check", driver_id=driver["id"])
    login_as_dispatcher(page, server)
    cell = row(page, order["id"]).locator("td.cell-seen")
    expect(cell).to_have_text(NOT_SEEN)
    expect(cell.locator("time")).to_have_attribute("datetime", order["updated_at"])

    with driver_socket(server, driver) as ws:
        send_seen(ws, order)
        # Live, without a reload. The socket's first receipt is written at once
        # (`ReceiptCoalescerTests`); 1 s here told that from the coalescing window only on a quiet
        # machine, and failed on a busy runner.
        expect(cell).to_have_text(SEEN, timeout=LIVE_TIMEOUT_MS)
        seen = api.ok("GET", f"/api/orders/{order['id']}/")["seen"]
        assert seen["driver_id"] == driver["id"] and seen["version"] == order["version"]
        expect(cell.locator("time")).to_have_attribute("datetime", seen["at"])

        row(page, order["id"]).get_by_role("link").click()
        detail = page.locator("#detail-seen")
        expect(detail).to_have_text(SEEN)
        screenshot(page, "receipts-seen")

        # A dispatcher changes the order: the driver has not seen this version yet.
        changed = api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": "Gate 4, ring twice"})
        expect(detail).to_have_text(NOT_SEEN, timeout=LIVE_TIMEOUT_MS)
        expect(detail.locator("time")).to_have_attribute("datetime", changed["updated_at"])
        expect(cell).to_have_text(NOT_SEEN)
        screenshot(page, "receipts-not-seen")

        # The phone refetched and shows the new version: seen again, in the open detail too.
        send_seen(ws, changed)
        expect(detail).to_have_text(SEEN, timeout=LIVE_TIMEOUT_MS)
        expect(cell).to_have_text(SEEN)

    # Reassigned to another driver: the first driver's receipt does not count for the new one.
    other = server.drivers[1]
    api.ok("POST", f"/api/orders/{order['id']}/assign", {"driver_id": other["id"]})
    expect(detail).to_have_text(NOT_SEEN, timeout=LIVE_TIMEOUT_MS)


def card(page, key):
    return page.locator(f'#fleet-grid article[data-driver-id="{key}"]')


def test_fleet_board_shows_whether_each_driver_has_seen_everything(page, server, api):
    driver = server.drivers[2]
    login_as_dispatcher(page, server)
    page.get_by_role("link", name="Fleet board").click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    summary = card(page, driver["id"]).locator(".card-seen")

    with driver_socket(server, driver) as ws:
        # The phone shows everything currently assigned to the driver.
        active = api.ok("GET", f"/api/orders/?driver_id={driver['id']}&active=true&limit=100")
        if active:
            send_seen(ws, *active)
        expect(summary).to_have_text("All seen on the driver’s device", timeout=LIVE_TIMEOUT_MS)
        expect(summary).to_have_attribute("data-seen", "all")

        # A new order for the driver: one not seen yet, marked on its line.
        order = api.create_order("Fleet receipt", driver_id=driver["id"])
        expect(summary).to_have_text("1 not seen yet", timeout=LIVE_TIMEOUT_MS)
        item = card(page, driver["id"]).locator(f'li[data-order-id="{order["id"]}"]')
        expect(item).to_have_attribute("data-seen", "false")
        expect(item.locator(".seen-mark")).to_have_text(NOT_SEEN)
        screenshot(page, "fleet-receipts")

        send_seen(ws, order)
        expect(summary).to_have_text("All seen on the driver’s device", timeout=LIVE_TIMEOUT_MS)
        expect(item).to_have_attribute("data-seen", "true")
        expect(item.locator(".seen-mark")).to_have_text(SEEN)
