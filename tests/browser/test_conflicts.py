"""Lost-update protection in the panel: edits name the version on screen (If-Match); a 412 says
"changed meanwhile", shows the current version, overwrites nothing, and the user can redo."""
import urllib.request

from playwright.sync_api import expect

from conftest import LIVE_TIMEOUT_MS, login_as_dispatcher, screenshot


def hold_stale(page, server, api, order_id):
    """Until the panel's next write on the order (a PATCH, a status POST, a DELETE), its reads of the
    order get the order as it is now. A stale view is what the test is about: without the hold,
    a refetch the panel makes on its own (its socket is held silent, so it reconnects now and then
    and refreshes) could land between the other client's change and the click, and the click
    would then name the fresh version (a CI run lost that race). Call it before that change."""
    request = urllib.request.Request(f"{server.base_url}/api/orders/{order_id}/")
    request.add_header("Authorization", f"Bearer {api.token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
        headers = {name: value for name, value in response.getheaders()
                   if name.lower() in ("content-type", "etag", "cache-control")}
    state = {"holding": True}
    path = f"/api/orders/{order_id}/"

    def handle(route):
        method, target = route.request.method, route.request.url.split("?")[0]
        if method not in ("GET", "HEAD"):
            state["holding"] = False  # the write itself, and every read after it, go through
        if state["holding"] and method == "GET" and target.endswith(path):
            route.fulfill(status=200, headers=headers, body=body)
        else:
            route.continue_()

    page.route(lambda url: path in url, handle)


def test_an_edit_made_on_an_older_version_is_refused_and_can_be_redone(page, server, api):
    login_as_dispatcher(page, server)
    order = api.create_order("Edit race", driver_id=server.drivers[0]["id"])
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text("Edit race")
    page.locator("#edit-order").click()
    expect(page.locator("#edit-title")).to_be_focused()
    page.locator("#edit-notes").fill("Gate 4 (mine)")

    # A second dispatcher saves first, while the form is open.
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": "Gate 9 (theirs)"})
    # The detail beside the form shows their change live; the form keeps the version it was opened on.
    expect(page.locator(".notes")).to_have_text("Gate 9 (theirs)")
    expect(page.locator("#edit-notes")).to_have_value("Gate 4 (mine)")

    page.locator("#save-edit").click()
    expect(page.locator("#detail-error")).to_contain_text("This order was changed meanwhile")
    screenshot(page, "changed-meanwhile-edit")
    expect(page.locator(".notes")).to_have_text("Gate 9 (theirs)")
    expect(page.locator(".facts dd").nth(2)).to_have_text("2")  # the version shown is the current one
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["notes"] == "Gate 9 (theirs)" and stored["version"] == 2  # nothing overwritten

    # Having seen their version, the user saves again on purpose: now it applies.
    expect(page.locator("#edit-notes")).to_have_value("Gate 4 (mine)")
    page.locator("#save-edit").click()
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(page.locator(".notes")).to_have_text("Gate 4 (mine)")
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["notes"] == "Gate 4 (mine)" and stored["version"] == 3


def test_saving_again_after_a_412_keeps_what_the_other_dispatcher_changed_in_fields_left_alone(page, server, api):
    """A edits the notes; B renames the order meanwhile. After the 412, saving again writes A's notes
    and leaves B's title: a field A never touched is not written back with its old text."""
    login_as_dispatcher(page, server)
    order = api.create_order("Pallets", driver_id=server.drivers[0]["id"])
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text("Pallets")
    page.locator("#edit-order").click()
    page.locator("#edit-notes").fill("Call before arrival")
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"title": "Pallets - URGENT gate 9"})
    page.locator("#save-edit").click()
    expect(page.locator("#detail-error")).to_contain_text("This order was changed meanwhile")
    expect(page.locator("#edit-title")).to_have_value("Pallets - URGENT gate 9")  # untouched: now theirs
    expect(page.locator("#edit-notes")).to_have_value("Call before arrival")  # mine: kept
    page.locator("#save-edit").click()
    expect(page.locator("#edit-form")).to_be_hidden()
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["title"] == "Pallets - URGENT gate 9", stored["title"]
    assert stored["notes"] == "Call before arrival"


def test_a_status_button_on_a_stale_view_is_refused_with_the_fresh_state_shown(page, server, api):
    login_as_dispatcher(page, server)
    # No live link for this page (a socket that never says anything), so the change below cannot
    # reach it before the click: the window in which a real panel would show a stale order.
    page.route_web_socket("**/ws/orders/**", lambda ws: None)
    page.reload()
    # Let the page's first load finish before the order exists: that load refetches whatever
    # detail is open once the drivers are in, and if it ran after the PATCH below it would show
    # the fresh version before the click (a CI run lost that race). Rows drawn means it has
    # passed that point with no detail open.
    expect(page.locator("#orders-table tbody tr").first).to_be_visible()
    order = api.create_order("Button race", driver_id=server.drivers[1]["id"])
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text("Button race")
    expect(page.locator("#forward-button")).to_have_text("Mark accepted")

    hold_stale(page, server, api, order["id"])
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"title": "Button race (moved to Gate 9)"})
    page.locator("#forward-button").click()
    expect(page.locator("#detail-error")).to_contain_text("This order was changed meanwhile")
    expect(page.locator("#detail-heading")).to_contain_text("Button race (moved to Gate 9)")
    screenshot(page, "changed-meanwhile-status")
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["status"] == "assigned" and stored["version"] == 2

    # The user has now seen the change and redoes the action. The panel refetches after every write;
    # that read must be over before the next hold, or it may reach the server after the PATCH below
    # and put the fresh version on screen (a CI run, 2026-12-06: the DELETE then named it and went
    # through). Waited for here, so it is answered before the hold starts.
    detail = f"/api/orders/{order['id']}/"
    with page.expect_response(lambda r: r.request.method == "GET" and r.url.split("?")[0].endswith(detail)):
        page.locator("#forward-button").click()
    expect(page.locator(".facts .badge")).to_have_text("Accepted")
    expect(page.locator("#detail-error")).to_be_empty()
    assert api.ok("GET", f"/api/orders/{order['id']}/")["status"] == "accepted"

    # Delete names the version too: a change made after the user looked stops it. The socket stays
    # silent (its route is kept): with the live link back, the PATCH's event refetched the detail
    # at once, and that read once reached the server past the new hold (a CI run, 2026-12-06: the
    # DELETE then named the fresh version and succeeded). The first hold lets everything through
    # since the status write, and the newer route is asked first.
    hold_stale(page, server, api, order["id"])
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": "late change"})
    page.locator("#delete-order").click()
    page.locator("#confirm-ok").click()
    expect(page.locator("#detail-error")).to_contain_text("This order was changed meanwhile")
    expect(page.locator(".notes")).to_have_text("late change")
    assert api.call("GET", f"/api/orders/{order['id']}/")[0] == 200


def test_an_older_answer_arriving_last_does_not_take_the_detail_back(page, server, api):
    """Two loads of one order overlap (a live event's, and opening the order again): when the older
    answer comes last, the panel keeps the newer version it already shows."""
    login_as_dispatcher(page, server)
    order = api.create_order("Overlap", driver_id=server.drivers[0]["id"])
    detail = f"/#/orders/{order['id']}"
    page.goto(detail)
    expect(page.locator("#detail-heading")).to_contain_text("Overlap")

    held = []
    mode = {"hold": "none"}  # none | next | all

    def handle(route):
        if route.request.method == "GET" and mode["hold"] != "none":
            if mode["hold"] == "next":
                mode["hold"] = "none"
            held.append((route, route.fetch()))  # answered by the server now, delivered later (or never)
        else:
            route.continue_()

    page.route(f"**/api/orders/{order['id']}/", handle)
    mode["hold"] = "next"
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": "second"})  # v2: the event's load is held
    for _ in range(50):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the panel loaded the order after the event"
    stale_route, stale_answer = held[0]
    api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": "third"})
    page.goto("/#/orders")
    page.goto(detail)  # opening it again loads v3
    expect(page.locator(".notes")).to_have_text("third")
    mode["hold"] = "all"  # whatever loads next stays unanswered: only the stale answer can change the view
    # The v2 answer arrives last; the check starts once the browser has read it all, then leaves
    # the page's script time to act on it (a fixed pause from the fulfil alone could end first).
    with page.expect_event("requestfinished", lambda request: request == stale_route.request):
        stale_route.fulfill(response=stale_answer)
    page.wait_for_timeout(500)
    expect(page.locator(".notes")).to_have_text("third")
    expect(page.locator(".facts dd").nth(2)).to_have_text("3")


def test_a_confirmation_dialog_open_while_the_order_changes_does_not_act_on_the_new_version(page, server, api):
    """Delete and Cancel name the version the dialog showed: a live event that reloads the detail
    behind an open dialog (someone changed the order while the user read it) must not let the
    confirm apply to a version the user never saw (found by a review: it read the tag after the
    dialog closed)."""
    login_as_dispatcher(page, server)
    order = api.create_order("Dialog race", driver_id=server.drivers[0]["id"])
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text("Dialog race")

    for button in ("#delete-order", "#cancel-order"):
        page.locator(button).click()
        expect(page.locator("#confirm-ok")).to_be_visible()
        version = api.ok("GET", f"/api/orders/{order['id']}/")["version"]
        api.ok("PATCH", f"/api/orders/{order['id']}/", {"notes": f"changed under the {button} dialog"})
        # The live event has reloaded the detail behind the dialog.
        expect(page.locator(".notes")).to_have_text(f"changed under the {button} dialog")
        expect(page.locator(".facts dd").nth(2)).to_have_text(str(version + 1))
        page.locator("#confirm-ok").click()
        expect(page.locator("#detail-error")).to_contain_text("This order was changed meanwhile")
        stored = api.ok("GET", f"/api/orders/{order['id']}/")
        assert stored["status"] == "assigned" and stored["version"] == version + 1


def hold_refetches(page, order_id):
    """Until the returned function is called, the panel's reads of the order wait (answered then:
    its refetches land late); its writes go through."""
    held, path = [], f"**/api/orders/{order_id}/"

    def handle(route, request):
        if request.method == "GET":
            held.append(route)
            return None
        return route.continue_()

    page.route(path, handle)

    def release():
        assert held, "the refetches were held"
        for route in held:
            route.continue_()
        page.unroute(path)

    return release


def open_assigned_order(page, server, api, title):
    """Logs in and opens a new order assigned to a driver (its next move: Mark accepted)."""
    login_as_dispatcher(page, server)
    order = api.create_order(title, driver_id=server.drivers[0]["id"])
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#forward-button")).to_have_text("Mark accepted")
    return order


def open_assigned_order_holding_refetches(page, server, api, title):
    """`open_assigned_order`, then holds the panel's reads of the order from then on
    (`hold_refetches`). Returns the order and the release."""
    order = open_assigned_order(page, server, api, title)
    return order, hold_refetches(page, order["id"])


def test_the_dispatchers_own_quick_second_move_is_not_refused_as_someone_elses_change(page, server, api):
    """Mark accepted, then at once Mark in progress, while the refetch after the first is slow: the
    first write's answer is drawn at once, so the second names the version the first made (a
    review found it sent the old one and got "changed meanwhile" for the dispatcher's own change)."""
    order, release_refetches = open_assigned_order_holding_refetches(page, server, api, "Two quick moves")
    page.locator("#forward-button").click()
    expect(page.locator("#forward-button")).to_have_text("Mark in progress", timeout=2_000)
    page.locator("#forward-button").click()
    expect(page.locator("#forward-button")).to_have_text("Mark completed", timeout=5_000)
    expect(page.locator("#detail-error")).to_have_text("")
    release_refetches()
    # The late answers (older or the same) do not take the detail back.
    expect(page.locator("#forward-button")).to_have_text("Mark completed")
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["status"] == "in_progress", stored["status"]



def test_a_move_right_after_the_dispatchers_own_edit_is_not_refused_as_someone_elses_change(page, server, api):
    """Save an edit, then at once Mark accepted, while the refetch after the save is slow: the
    edit's answer is drawn at once, so the move names the version the edit made (a review found
    the save ignored its answer: the move sent the old version and got "changed meanwhile")."""
    order, release_refetches = open_assigned_order_holding_refetches(page, server, api, "Edit then move")
    page.locator("#edit-order").click()
    page.locator("#edit-notes").fill("Gate 4")
    page.locator("#save-edit").click()
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(page.locator(".notes")).to_have_text("Gate 4", timeout=5_000)  # the refetches are held: the answer's
    page.locator("#forward-button").click()
    expect(page.locator("#forward-button")).to_have_text("Mark in progress", timeout=5_000)
    expect(page.locator("#detail-error")).to_have_text("")
    release_refetches()
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["status"] == "accepted" and stored["notes"] == "Gate 4", stored


def test_the_dispatchers_own_move_while_editing_does_not_fail_the_save(page, server, api):
    """Open Edit, then Mark accepted (outside the form), then save: the move's answer moves the form
    on to the version the move made, so the save is not refused as someone else's change (found by
    a review, 2026-12-07: 412, "changed meanwhile", for the user's own move)."""
    order = open_assigned_order(page, server, api, "Move while editing")
    expect(page.locator(".facts .badge")).to_have_text("Assigned")
    page.locator("#edit-order").click()
    page.locator("#edit-notes").fill("Gate 7")
    page.locator("#forward-button").click()
    expect(page.locator(".facts .badge")).to_have_text("Accepted")
    expect(page.locator("#edit-notes")).to_have_value("Gate 7")  # the draft stays
    page.locator("#save-edit").click()
    expect(page.locator("#edit-form")).to_be_hidden()
    expect(page.locator("#detail-error")).to_have_text("")
    stored = api.ok("GET", f"/api/orders/{order['id']}/")
    assert stored["status"] == "accepted" and stored["notes"] == "Gate 7", stored


def test_a_title_with_a_right_to_left_override_cannot_reorder_the_confirmation(page, server, api):
    """An order title carrying U+202E (right-to-left override) is isolated (U+2068 … U+2069) in the
    confirmation's sentence, so it cannot make the warning read otherwise (found by a review)."""
    login_as_dispatcher(page, server)
    title = "Gate \u202e9 kcod"
    order = api.create_order(title, driver_id=server.drivers[0]["id"])
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text("Gate")
    page.locator("#delete-order").click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    message = page.locator("#confirm-message").text_content()
    assert f"\u2068{title}\u2069" in message, repr(message)
    page.locator("#confirm-cancel").click()


def test_focus_inside_an_order_deleted_meanwhile_moves_to_its_heading(page, server, api):
    """A keyboard user is on the Assign select when another dispatcher deletes the order: focus
    moves to the detail's heading (it dropped to the page's body), and the notice is a live region."""
    login_as_dispatcher(page, server)
    order = api.create_order("Deleted under the cursor")
    page.goto(f"/#/orders/{order['id']}")
    expect(page.locator("#detail-heading")).to_contain_text("Deleted under the cursor")
    page.locator("#assign-driver").focus()
    api.ok("DELETE", f"/api/orders/{order['id']}/")
    expect(page.locator("#detail-gone")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#detail-heading")).to_be_focused()
    expect(page.locator("#detail-gone")).to_have_attribute("role", "status")
