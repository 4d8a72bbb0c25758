"""Fixtures for the panel's browser tests: the server under test, a REST client, Chromium pages.

The server is started by scripts/browser-tests.sh (state file in $WAYBILL_TEST_STATE); tests that
need to restart it use server_ctl on the same state file, so the port and data dir stay the same.
Every page records the URL of every request it makes, WebSocket included, and its console; a
page that violates the CSP, throws, or puts a token in a URL fails the test that opened it.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

sys.path.insert(0, str(Path(__file__).parent))
import server_ctl  # noqa: E402

ARTIFACTS = Path(os.environ.get("WAYBILL_BROWSER_ARTIFACTS", Path(__file__).parents[2] / "artifacts" / "browser"))
expect.set_options(timeout=5_000)


class Server:
    def __init__(self, state_file):
        self.state_file = state_file
        state = server_ctl.load(state_file)
        self.base_url = server_ctl.base_url(state)
        with open(state["fixtures"]) as f:
            self.fixtures = json.load(f)
        self.known_tokens = set(t for t in [self.fixtures["dispatcher"]["token"], self.fixtures.get("dispatcher_token")] if t)
        self.known_tokens.update(d["token"] for d in self.fixtures["drivers"])
        # The dispatcher's REST client of the tests ("another dispatcher"); see relogin_dispatcher.
        self.api = Client(self.base_url, self.fixtures["dispatcher"]["token"])

    @property
    def dispatcher(self):
        return self.fixtures["dispatcher"]

    @property
    def drivers(self):
        return self.fixtures["drivers"]

    def client(self, token):
        return Client(self.base_url, token)

    def relogin_dispatcher(self):
        """A fresh token for the tests' dispatcher client (after a panel logout revoked them all)."""
        status, body = Client(self.base_url, "").call(
            "POST", "/api/auth/login", {"email": self.dispatcher["email"], "password": self.dispatcher["password"]})
        assert status == 200, body
        self.api.token = body["token"]
        self.known_tokens.add(body["token"])

    def stop(self):
        server_ctl.stop(self.state_file)

    def start(self):
        server_ctl.start(self.state_file)


class Client:
    """A second client of the API: what "another dispatcher" or a driver's phone would do."""

    def __init__(self, base_url, token):
        self.base_url = base_url
        self.token = token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None

    def ok(self, method, path, body=None):
        status, data = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path} → {status} {data}"
        return data

    def create_order(self, title, driver_id=None, stages=None):
        body = {"title": title, "notes": "", "stages": stages or [{"kind": "pickup", "address": "Depot 1"}]}
        if driver_id is not None:
            body["driver_id"] = driver_id
        return self.ok("POST", "/api/orders/", body)


@pytest.fixture(scope="session")
def server():
    state_file = os.environ.get("WAYBILL_TEST_STATE")
    if not state_file:
        pytest.fail("WAYBILL_TEST_STATE is not set: run the browser tests with scripts/browser-tests.sh")
    return Server(state_file)


@pytest.fixture(scope="session")
def api(server):
    return server.api


@pytest.fixture(scope="session")
def browser():
    executable = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium refuses to start as root (CI runs as root) with its sandbox on.
        # --disable-dev-shm-usage: containers often have a tiny /dev/shm, which crashes tabs.
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


class PageRecorder:
    def __init__(self, page):
        self.bearer_tokens = set()  # every token the page sent in an Authorization header
        self.urls = []
        self.websocket_urls = []
        self.console_errors = []
        self.page_errors = []
        page.on("request", self.on_request)
        page.on("websocket", lambda ws: self.websocket_urls.append(ws.url))
        page.on("console", lambda msg: msg.type == "error" and self.console_errors.append(msg.text))
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))

    def on_request(self, request):
        self.urls.append(request.url)
        authorization = request.headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            self.bearer_tokens.add(authorization[7:].strip())

    def all_urls(self):
        return self.urls + self.websocket_urls


@pytest.fixture
def page_factory(browser, server):
    """New isolated pages (own sessionStorage), each recorded and checked when the test ends."""
    opened = []

    def open_page(viewport=None):
        # A fixed language and time zone: the panel formats times the browser's way, and the tests
        # read them ("Seen 10:15:03"); under LANG=fi_FI it wrote 10.15.03 (a review, 2026-12-07).
        context = browser.new_context(
            viewport=viewport or {"width": 1280, "height": 800}, base_url=server.base_url,
            locale="en-US", timezone_id="UTC")
        page = context.new_page()
        page.recorder = PageRecorder(page)
        opened.append((context, page))
        return page

    yield open_page
    problems = []
    for context, page in opened:
        recorder = page.recorder
        tokens = server.known_tokens | recorder.bearer_tokens
        for url in recorder.all_urls():
            for token in tokens:
                if token and token in url:
                    problems.append(f"an API token is in a request URL: {url.replace(token, '<token>')}")
        problems += [f"CSP violation: {text}" for text in recorder.console_errors if "Content Security Policy" in text]
        problems += [f"uncaught error in the page: {text}" for text in recorder.page_errors]
        context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def page(page_factory):
    return page_factory()


def screenshot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def login(page, server, email=None, password=None):
    """Logs in through the form, with the keyboard only, and waits for the orders table."""
    page.goto("/")
    expect(page.locator("#login-email")).to_be_focused()
    page.keyboard.type(email or server.dispatcher["email"])
    page.keyboard.press("Tab")
    page.keyboard.type(password or server.dispatcher["password"])
    page.keyboard.press("Enter")


def login_as_dispatcher(page, server):
    login(page, server)
    expect(page.locator("#orders-table tbody tr").first).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def row(page, order_id):
    return page.locator(f'#orders-table tbody tr[data-order-id="{order_id}"]')


LIVE_TIMEOUT_MS = 2_000  # the issue: a change by another client shows within 2 s, no reload


class ListRequests:
    """Every GET of the order list the page makes from now on, split into pages and `ids=` fetches."""

    def __init__(self, page):
        self.urls = []
        self.counts = []
        page.on("request", lambda request: request.method == "GET" and "/api/orders/?" in request.url
                and self.urls.append(request.url))
        page.on("request", lambda request: request.method == "GET" and request.url.endswith("/api/orders/counts")
                and self.counts.append(request.url))

    @property
    def pages(self):
        return [url for url in self.urls if "ids=" not in url]

    @property
    def by_ids(self):
        return [url for url in self.urls if "ids=" in url]


def wait_for_board_start_up_loads(page):
    """The order board's first page, and the refetch the socket's `connected` may ask for: it waits
    behind the 250 ms coalescing timer, which starts only once the socket is live, so a fixed pause
    from the first row may end before it (a review, 2026-12-07). Whether there is one depends on
    which came first, the first page or `connected`."""
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=LIVE_TIMEOUT_MS)
    page.wait_for_timeout(600)  # the coalescing window, and the refetch's answer rendered


def wait_until(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
