"""User text is text: titles, notes and addresses never become markup."""
from playwright.sync_api import expect

from conftest import LIVE_TIMEOUT_MS, login_as_dispatcher, row, screenshot

XSS = "<img src=x onerror=alert(1)>"


def test_an_html_title_renders_as_text_everywhere(page, server, api):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    login_as_dispatcher(page, server)
    order = api.create_order(XSS, driver_id=server.drivers[0]["id"],
                             stages=[{"kind": "pickup", "address": "<script>alert(2)</script>"}])
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": "<b>bold?</b>"})
    title_cell = row(page, order["id"]).locator("td").nth(0)
    expect(title_cell).to_have_text(XSS, timeout=LIVE_TIMEOUT_MS)

    row(page, order["id"]).get_by_role("link").click()
    expect(page.locator("#detail-heading")).to_contain_text(XSS)
    expect(page.locator("#detail-stages li")).to_contain_text("<script>alert(2)</script>")
    expect(page.locator(".notes")).to_have_text("<b>bold?</b>")
    page.goto("/#/fleet")
    expect(page.locator(f'#fleet-grid li[data-order-id="{order["id"]}"]')).to_contain_text(XSS)

    # No element was made from the text, and no script ran.
    assert page.locator("main img, main script, main b").count() == 0
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text(XSS)
    assert page.locator("main img, main script, main b").count() == 0
    screenshot(page, "xss-as-text")
    assert dialogs == []
