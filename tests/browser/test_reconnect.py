"""The panel survives a server restart: it shows it is reconnecting, then catches up by itself."""
import re
import urllib.request

from playwright.sync_api import expect

from conftest import login_as_dispatcher, row, screenshot


def test_server_restart_reconnects_and_catches_up(page, server, api):
    login_as_dispatcher(page, server)
    watched = api.create_order("Before the restart", driver_id=server.drivers[0]["id"])
    page.goto(f"/#/orders/{watched['id']}")
    expect(page.locator(".facts .badge")).to_have_text("Assigned")
    expect(row(page, watched["id"])).to_be_visible()
    sockets_before = len(page.recorder.websocket_urls)

    server.stop()
    try:
        indicator = page.locator("#connection")
        expect(indicator).to_have_attribute("data-state", re.compile("reconnecting|polling"), timeout=10_000)
        expect(page.locator("#connection-label")).to_have_text(re.compile("Reconnecting|Polling only"))
        screenshot(page, "reconnecting")
        # What the panel shows stays on screen while the server is away.
        expect(row(page, watched["id"])).to_be_visible()
    finally:
        server.start()  # same port, same data dir

    # Changes made before the panel is back: it must catch up without a reload.
    api.ok("POST", f"/api/orders/{watched['id']}/status", {"status": "accepted"})
    made_while_away = api.create_order("After the restart")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=40_000)
    expect(row(page, made_while_away["id"])).to_be_visible(timeout=5_000)
    expect(row(page, watched["id"]).locator("td").nth(1)).to_have_text("Accepted")
    expect(page.locator(".facts .badge")).to_have_text("Accepted")

    # The new socket used a fresh ticket and resumed from the last event it had seen: by its
    # cursor ("<event_id>-<check>", SPEC §5 rule 5), with `since` for servers that predate cursors.
    new_sockets = page.recorder.websocket_urls[sockets_before:]
    assert new_sockets and all("ticket=" in url for url in new_sockets)
    assert re.search(r"[?&]cursor=\d+-[0-9a-f]+(&|$)", new_sockets[-1]), new_sockets[-1]
    assert "since=" in new_sockets[-1]
    # And the server took it as a resume, not a `reset` and a full reload (which would show the
    # same rows): the restarted server counted no reset.
    counters = metrics(server)
    assert counters.get("waybill_resumes_total", 0) >= 1, counters
    assert counters.get("waybill_resets_total") == 0, counters

    # And it is really live again: the next change arrives over the socket within 2 s.
    api.ok("POST", f"/api/orders/{watched['id']}/status", {"status": "in_progress"})
    expect(page.locator(".facts .badge")).to_have_text("In progress", timeout=2_000)


def metrics(server):
    """The server's unlabelled counters, by name."""
    with urllib.request.urlopen(server.base_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) == 2 and not line.startswith("#") and "{" not in parts[0]:
            values[parts[0]] = float(parts[1])
    return values


def test_without_a_live_link_the_panel_says_polling_only_and_still_works(page, server, api):
    login_as_dispatcher(page, server)
    # A server (or proxy) without the ticket endpoint: no socket is possible at all.
    page.route("**/api/ws-ticket", lambda route: route.fulfill(
        status=404, content_type="application/json", body='{"error":"not_found","message":"No such route."}'))
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "polling")
    expect(page.locator("#connection-label")).to_have_text("Polling only")
    expect(page.get_by_role("button", name="Reconnect now")).to_be_visible()
    order = api.create_order("Seen by polling")
    # No event will come; the user can refresh at once with "Reconnect now" (which also polls).
    page.get_by_role("button", name="Reconnect now").click()
    expect(row(page, order["id"])).to_be_visible()
