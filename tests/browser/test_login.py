"""Logging in and out of the panel."""
import json
import re
import pytest
from playwright.sync_api import expect

from conftest import login, login_as_dispatcher, screenshot


def test_bad_login_shows_an_error_in_plain_words(page, server):
    login(page, server, password="not-the-password")
    expect(page.locator("#login-error")).to_have_text("Wrong email or password.")
    expect(page.locator("#topbar")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None
    screenshot(page, "login-error")


def test_login_shows_orders_and_logout_revokes_the_token(page, server, api):
    page.goto("/")
    screenshot(page, "login")
    login_as_dispatcher(page, server)
    expect(page).to_have_url(f"{server.base_url}/#/orders")
    expect(page.locator("#connection-label")).to_have_text("Live")
    session = page.evaluate("JSON.parse(sessionStorage.getItem('waybill.session'))")
    assert session["token"] and session["user"]["role"] == "dispatcher"
    assert server.client(session["token"]).call("GET", "/api/me")[0] == 200
    # The first page of the active orders is listed, newest first (earlier tests may have made
    # more orders than one page holds).
    first_page = [order["id"] for order in api.ok("GET", "/api/orders/?active=true&limit=50")]
    expect(page.locator("#orders-table tbody tr")).to_have_count(len(first_page))
    shown = [int(x) for x in page.locator("#orders-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.orderId)")]
    assert shown == first_page
    screenshot(page, "orders")

    try:
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"{server.base_url}/#/login")
        expect(page.locator(".login-form .notice")).to_have_text("You have logged out.")
        assert page.evaluate("sessionStorage.getItem('waybill.session')") is None
        # The server forgot the token too (logout revokes every token of the user).
        assert server.client(session["token"]).call("GET", "/api/me")[0] == 401
    finally:
        server.relogin_dispatcher()  # the tests' own dispatcher client was logged out as well
    # A protected page without a session: the login page, then that page after logging in.
    order_id = server.drivers[0]["order_ids"][0]
    page.goto(f"/#/orders/{order_id}")
    expect(page.locator("#login-email")).to_be_visible()
    page.locator("#login-email").fill(server.dispatcher["email"])
    page.locator("#login-password").fill(server.dispatcher["password"])
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{server.base_url}/#/orders/{order_id}")
    expect(page.locator(".facts")).to_be_visible()


def test_logout_says_logged_out_even_when_the_sockets_close_comes_first(page, server):
    """The server closes the user's sockets (4001) as it revokes the token; when that close beats
    the logout's own answer, the panel used to say "The live connection was refused"."""
    login_as_dispatcher(page, server)
    expect(page.locator("#connection-label")).to_have_text("Live")

    def answer_late(route):
        response = route.fetch()  # the logout happens now; its answer reaches the page later
        page.wait_for_timeout(700)
        route.fulfill(response=response)

    page.route("**/api/auth/logout", answer_late)
    try:
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"{server.base_url}/#/login")
        expect(page.locator(".login-form .notice")).to_have_text("You have logged out.")
    finally:
        server.relogin_dispatcher()  # the tests' own dispatcher client was logged out as well


def hold_a_list_load(page):
    """Asks the orders page for a list load (the status filter) and holds it: returns its route,
    for the test to answer when it chooses. Later loads go through."""
    held = []

    def list_load(route):
        if not held and route.request.method == "GET":
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/orders/?*", list_load)
    page.locator("#filter-status").select_option("all")
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the list was loaded again"
    return held[0]


def test_logout_says_logged_out_when_a_load_in_flight_gets_its_401_first(page, server):
    """A list load still on its way when the logout revokes the token gets a 401 before the logout's
    own answer: that used to end the session as "Your session has ended" instead."""
    login_as_dispatcher(page, server)
    expect(page.locator("#orders-table tbody tr").first).to_be_visible()
    held = []  # answered after the logout revoked the token

    def logout(route):
        response = route.fetch()  # the token is revoked now
        for waiting in held:
            waiting.fulfill(response=waiting.fetch())  # its 401 reaches the page first
        page.wait_for_timeout(300)
        route.fulfill(response=response)

    page.route("**/api/auth/logout", logout)
    try:
        held.append(hold_a_list_load(page))
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"{server.base_url}/#/login")
        expect(page.locator(".login-form .notice")).to_have_text("You have logged out.")
    finally:
        server.relogin_dispatcher()


@pytest.mark.parametrize("failure", ["unavailable", "unreachable"])
def test_a_logout_the_server_did_not_confirm_says_so(page, server, failure):
    """Logout is "log out everywhere": when the server answered 503 or could not be reached, no
    token was revoked, and the panel used to say "You have logged out." all the same."""
    login_as_dispatcher(page, server)
    expect(page.locator("#connection-label")).to_have_text("Live")
    token = page.evaluate("JSON.parse(sessionStorage.getItem('waybill.session')).token")

    def fail(route):
        if failure == "unavailable":
            route.fulfill(status=503, content_type="application/json",
                          body='{"error":"store_unavailable","message":"The store is unavailable."}')
        else:
            route.abort("connectionrefused")

    page.route("**/api/auth/logout", fail)
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{server.base_url}/#/login")
    notice = page.locator(".login-form .notice")
    expect(notice).to_contain_text("the server did not confirm it")
    expect(notice).to_contain_text("other sessions may still be open")
    # Logged out here all the same, and the token really is still valid on the server.
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None
    assert server.client(token).call("GET", "/api/me")[0] == 200


def test_a_driver_cannot_use_the_panel(page, server):
    driver = server.drivers[0]
    # The panel asks for a dispatcher's login: the server refuses the driver before it makes a
    # token (one the panel could not revoke without logging the driver's phone out).
    with page.expect_response("**/api/auth/login") as answer:
        login(page, server, email=driver["email"], password=driver["password"])
    assert answer.value.status == 403
    assert answer.value.json()["error"] == "wrong_role"
    expect(page.locator("#login-error")).to_contain_text("for dispatchers")
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None


def test_a_server_that_makes_the_driver_a_token_anyway_still_turns_the_driver_away(page, server):
    driver = server.drivers[0]
    # A server older than `role` in the login answers 200 with the driver's token.
    page.route("**/api/auth/login", lambda route: route.fulfill(
        status=200, content_type="application/json",
        body='{"token": "t", "user": {"id": 9, "role": "driver", "email": "d@example.com"}}'))
    login(page, server, email=driver["email"], password=driver["password"])
    expect(page.locator("#login-error")).to_contain_text("for dispatchers")
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None


def test_an_expired_token_sends_the_user_back_to_login(page, server):
    page.goto("/#/login")
    page.evaluate("""sessionStorage.setItem('waybill.session', JSON.stringify(
        {token: 'no-longer-valid', user: {id: 1, role: 'dispatcher', email: 'x@example.com'}}))""")
    page.reload()  # the panel reads the stored session at start, then its first API call gets 401
    expect(page.locator("#login-email")).to_be_visible()
    expect(page.locator(".login-form .notice")).to_contain_text("log in again")
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None


def test_a_tab_restored_long_after_it_was_left_starts_at_the_login(page, server):
    """Browsers restore a reopened tab's sessionStorage: on a shared computer, a dispatcher's tab
    reopened by the next person 11 minutes later must not be logged in (a few minutes later, as
    after a mis-click, it still is). The token is forgotten, not revoked."""
    login_as_dispatcher(page, server)
    stored = page.evaluate("JSON.parse(sessionStorage.getItem('waybill.session'))")
    assert abs(stored["seenAt"] - page.evaluate("Date.now()")) < 60_000

    def restored(minutes_ago):
        """A new tab whose sessionStorage holds the session as its tab left it `minutes_ago`
        (None: saved without a stamp, by a panel from before the stamps)."""
        tab = page.context.new_page()
        seen = "undefined" if minutes_ago is None else "Date.now() - %d" % (minutes_ago * 60_000)
        tab.add_init_script(
            "sessionStorage.setItem('waybill.session', JSON.stringify(Object.assign(%s, {seenAt: %s})))"
            % (json.dumps(stored), seen))
        tab.goto(f"{server.base_url}/#/orders")
        return tab

    # Left 11 minutes ago, without a stamp (maybe weeks ago), or stamped 11 minutes ahead of the clock.
    for minutes_ago in (11, None, -11):
        late = restored(minutes_ago)
        expect(late.locator("#login-email")).to_be_visible()
        assert late.evaluate("sessionStorage.getItem('waybill.session')") is None
        late.close()
    soon = restored(5)
    expect(soon.locator("#orders-table tbody tr").first).to_be_visible()
    soon.close()
    # Forgotten, not revoked: the dispatcher's other tabs and computers stay logged in.
    assert server.client(stored["token"]).call("GET", "/api/me")[0] == 200


def test_a_reload_after_a_long_while_keeps_the_session(page, server):
    """A tab left open (a wallboard, a laptop that slept) is not a restored one: the page stamps
    its session as it unloads, so a reload finds it fresh however old the last stamp was."""
    login_as_dispatcher(page, server)
    page.evaluate("""(() => {
        const s = JSON.parse(sessionStorage.getItem('waybill.session'));
        s.seenAt = Date.now() - 60 * 60 * 1000;
        sessionStorage.setItem('waybill.session', JSON.stringify(s));
    })()""")
    page.reload()
    expect(page.locator("#orders-table tbody tr").first).to_be_visible()
    expect(page).to_have_url(f"{server.base_url}/#/orders")


def test_a_page_back_from_the_back_forward_cache_is_judged_when_it_shows(page, server):
    """A page the browser restores from its back/forward cache runs no script again: the panel
    judges its session on `pageshow` (persisted), and one left too long ago starts over at the
    login page. (The event is dispatched here; headless browsers do not all keep such pages.)"""
    login_as_dispatcher(page, server)
    page.evaluate("""(() => {
        const s = JSON.parse(sessionStorage.getItem('waybill.session'));
        s.seenAt = Date.now() - 30 * 60 * 1000;
        sessionStorage.setItem('waybill.session', JSON.stringify(s));
        dispatchEvent(new PageTransitionEvent('pageshow', {persisted: true}));
    })()""")
    expect(page.locator("#login-email")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('waybill.session')") is None


def test_a_late_401_for_an_ended_sessions_token_leaves_the_next_session_alone(page, server):
    """A request sent with the old token and answered after the user logged in again gets its 401
    then: it used to end the new session as "Your session has ended" (found by a review, 2026-12-07)."""
    login_as_dispatcher(page, server)
    try:
        held = hold_a_list_load(page)  # answered once the user is back in
        page.get_by_role("button", name="Log out").click()
        expect(page.locator(".login-form .notice")).to_have_text("You have logged out.")
        # Back in on the same page (a reload would drop the request still on its way).
        page.locator("#login-email").fill(server.dispatcher["email"])
        page.locator("#login-password").fill(server.dispatcher["password"])
        page.locator("#login-password").press("Enter")
        expect(page.locator("#orders-table tbody tr").first).to_be_visible()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        answer = held.fetch()
        assert answer.status == 401  # the old token is revoked
        held.fulfill(response=answer)
        page.wait_for_timeout(1500)  # its 401 is handled within milliseconds: ended the session before
        expect(page).to_have_url(re.compile(r"#/orders"))
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    finally:
        server.relogin_dispatcher()


def test_a_question_left_open_closes_when_the_session_ends(page, server, api):
    """A cancel's confirmation open when the session ends (a logout elsewhere revokes the token and
    the socket is closed 4001) closes with it: it stayed over the login page, blocking the form and
    showing the order to whoever used the computer next (found by a review, 2026-12-07)."""
    order = api.create_order("Asked about", driver_id=server.drivers[0]["id"])
    login_as_dispatcher(page, server)
    page.goto(f"/#/orders/{order['id']}")
    page.get_by_role("button", name="Cancel order").click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    try:
        api.ok("POST", "/api/auth/logout", {})  # every token of the dispatcher, the page's too
        expect(page).to_have_url(f"{server.base_url}/#/login", timeout=10_000)
        expect(page.locator("#confirm-dialog")).to_be_hidden()
        expect(page.locator("#login-email")).to_be_editable()
    finally:
        server.relogin_dispatcher()
    assert api.ok("GET", f"/api/orders/{order['id']}/")["status"] == "assigned"


def test_a_load_still_on_its_way_at_logout_sends_nothing_more_and_leaves_the_login_page_alone(page, server):
    """The orders page's first load asks for the drivers, then the list, the counts: held until
    after the logout, its answer let the load go on, and the next requests went out with no token
    at all. Their 401s counted as this session's and put up a fresh login page, wiping what the
    next person had typed (found by a review, 2026-12-07)."""
    held = []

    def drivers(route):
        if not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/drivers/*", drivers)
    without_token = []
    page.on("request", lambda request: "/api/" in request.url and "/api/auth/login" not in request.url
            and "authorization" not in request.headers and without_token.append(request.url))
    login(page, server)
    try:
        for _ in range(50):  # the page's events are handled while Playwright waits
            if held:
                break
            page.wait_for_timeout(100)
        assert held, "the drivers were not asked for"
        page.get_by_role("button", name="Log out").click()
        expect(page.locator(".login-form .notice")).to_have_text("You have logged out.")
        page.locator("#login-email").fill("next.person@example.com")
        held[0].continue_()  # its answer (401: the token is revoked) comes after the logout
        page.wait_for_timeout(1500)  # the rest of the load followed within milliseconds before
        expect(page.locator("#login-email")).to_have_value("next.person@example.com")
        expect(page.locator(".login-form .notice")).to_have_text("You have logged out.")
        assert without_token == [], without_token
    finally:
        server.relogin_dispatcher()
