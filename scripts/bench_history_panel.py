"""The panel at scale, in headless Chromium (run by scripts/bench-history.sh).

    python bench_history_panel.py BASE_URL FIXTURES_JSON EVENTS

Prints one JSON object: the first render of the default view (active orders) and of the history
view (navigation start → first row on screen, and the bytes the API sent meanwhile), then the
API bytes the panel downloads per event while another client changes orders on the visible page.
"""
import json
import os
import statistics
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright


def call(base, token, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


class ApiBytes:
    """Bytes of every /api/ response (headers + body, as the network layer counts them)."""

    def __init__(self, page):
        self.bytes = 0
        self.requests = []
        page.on("requestfinished", self.finished)

    def finished(self, request):
        if "/api/" not in request.url:
            return
        sizes = request.sizes()
        size = sizes["responseBodySize"] + sizes["responseHeadersSize"]
        self.bytes += size
        self.requests.append((request.url.split("/api/", 1)[1], size))

    def take(self):
        taken, self.bytes, self.requests = (self.bytes, self.requests), 0, []
        return taken


def first_render(browser, base, session, hash_route):
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
    # Logged in already: the measurement is the list, not the login form.
    # With the stamp of an open tab (`seenAt`, session.js): a session without one counts as a tab
    # left long ago and starts at the login page.
    context.add_init_script(
        f"sessionStorage.setItem('waybill.session', JSON.stringify(Object.assign({json.dumps(session)}, {{seenAt: Date.now()}})));")
    page = context.new_page()
    counter = ApiBytes(page)
    started = time.monotonic()
    page.goto(f"/{hash_route}")
    page.locator("#orders-table tbody tr").first.wait_for(state="visible", timeout=30_000)
    elapsed = time.monotonic() - started
    rows = page.locator("#orders-table tbody tr").count()
    page.wait_for_timeout(300)
    total, requests = counter.take()
    return page, context, counter, {"seconds": round(elapsed, 3), "rows": rows, "api_bytes": total,
                                    "requests": [r for r, _ in requests]}


def main():
    base, fixtures_path, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fixtures = json.load(open(fixtures_path))
    token = fixtures["dispatcher_token"]
    me = call(base, token, "GET", "/api/me")
    session = {"token": token, "user": me}
    result = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium"), headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"])
        page, context, _, result["history_first_render"] = first_render(browser, base, session, "#/orders?status=all")
        context.close()
        page, context, counter, result["first_render"] = first_render(browser, base, session, "#/orders")
        page.locator("#connection[data-state=live]").wait_for(timeout=10_000)
        page.wait_for_timeout(1_000)
        counter.take()

        # Events for rows on the page: one status change each, spaced out so each is its own burst.
        visible = [int(x) for x in page.locator("#orders-table tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.orderId)")]
        per_event = []
        for order_id in visible[:events]:
            order = call(base, token, "GET", f"/api/orders/{order_id}/")
            if order["status"] != "assigned":
                continue
            call(base, token, "POST", f"/api/orders/{order_id}/status", {"status": "accepted"})
            row = page.locator(f'#orders-table tbody tr[data-order-id="{order_id}"] td').nth(1)
            row.filter(has_text="Accepted").wait_for(timeout=5_000)
            page.wait_for_timeout(400)  # the counts request of the same burst
            total, requests = counter.take()
            per_event.append({"bytes": total, "requests": [r for r, _ in requests]})
        sizes = [e["bytes"] for e in per_event]
        result["per_event"] = {
            "events": len(per_event), "median_bytes": statistics.median(sizes) if sizes else None,
            "max_bytes": max(sizes) if sizes else None, "example": per_event[0] if per_event else None,
        }
        context.close()
        browser.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
