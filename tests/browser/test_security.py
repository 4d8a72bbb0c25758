"""Security rules of the panel: CSP and nosniff, tickets instead of tokens, no markup sinks."""
import re
from pathlib import Path

from playwright.sync_api import expect

from conftest import login_as_dispatcher

WEB = Path(__file__).parents[2] / "Sources" / "WaybillAPI" / "Web"


def test_pages_are_served_with_csp_and_nosniff(page, server):
    for path in ["/", "/assets/app.js", "/assets/styles.css"]:
        response = page.request.get(server.base_url + path)
        assert response.status == 200, path
        headers = response.headers
        assert headers.get("x-content-type-options") == "nosniff", path
        csp = headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "style-src 'self'" in csp, (path, csp)
        assert "unsafe-inline" not in csp


def test_no_request_carries_the_api_token_in_its_url(page, server):
    # A whole session: login, list, detail, fleet, back, reload. Every URL is recorded
    # (page_factory also checks this for every other test).
    login_as_dispatcher(page, server)
    order_id = server.drivers[0]["order_ids"][0]
    page.goto(f"/#/orders/{order_id}")
    expect(page.locator(".facts")).to_be_visible()
    page.goto("/#/fleet")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    urls = page.recorder.all_urls()
    assert any("/api/orders/" in url for url in urls)
    sockets = page.recorder.websocket_urls
    assert len(sockets) >= 3
    for url in sockets:
        assert re.search(r"[?&]ticket=[^&]+", url), url
        assert "token=" not in url, url
    panel_tokens = page.recorder.bearer_tokens
    assert panel_tokens, "the panel sent no Authorization header"
    for url in urls:
        for token in server.known_tokens | panel_tokens:
            assert token not in url
    # Tickets are single-use: every socket used a new one.
    tickets = [re.search(r"ticket=([^&]+)", url).group(1) for url in sockets]
    assert len(set(tickets)) == len(tickets)


def test_a_refused_socket_sends_the_user_back_to_login(page, server):
    login_as_dispatcher(page, server)
    # The next tickets are ones the server never issued: each socket is closed with 4001 before
    # `connected`. The first such refusal is tried once more with a fresh ticket (a real one may
    # have expired on its way in); the second stops and asks for a login instead of looping.
    page.route("**/api/ws-ticket", lambda route: route.fulfill(
        status=200, content_type="application/json", body='{"ticket":"not-a-real-ticket","expires_in":60}'))
    page.reload()
    expect(page.locator("#login-email")).to_be_visible(timeout=10_000)
    expect(page.locator(".login-form .notice")).to_contain_text("log in again")
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None
    attempts = len([u for u in page.recorder.websocket_urls if "not-a-real-ticket" in u])
    page.wait_for_timeout(1500)
    assert len([u for u in page.recorder.websocket_urls if "not-a-real-ticket" in u]) == attempts == 2


def test_the_panel_source_has_no_html_sinks_or_inline_code():
    index = (WEB / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", index), "inline <script> in index.html"
    assert not re.search(r"\sstyle=", index) and "<style" not in index
    assert not re.search(r"\son[a-z]+=", index), "inline event handler in index.html"
    for source in (WEB / "assets").glob("*.js"):
        text = source.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            # dom.js names the first two only to refuse them.
            if source.name == "dom.js" and sink in ("innerHTML", "outerHTML"):
                continue
            assert sink not in text, f"{source.name} uses {sink}"


def test_refetches_revalidate_with_the_etag(page, server):
    fetches = []
    page.on("response", lambda response: response.request.method == "GET" and "/api/orders/" in response.url
            and fetches.append((response.status, response.request.headers.get("if-none-match"))))
    login_as_dispatcher(page, server)
    # The page loads the list at once and again when the socket says "connected": the second
    # time nothing changed, so the server answers 304 to the ETag the first answer carried.
    page.wait_for_function("document.querySelectorAll('#orders-table tbody tr').length > 0")
    page.locator("#connection-retry").evaluate("b => b.click()")  # a reconnect refetches too
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    page.wait_for_timeout(600)
    assert fetches[0][0] == 200
    assert any(status == 304 and etag for status, etag in fetches[1:]), fetches
