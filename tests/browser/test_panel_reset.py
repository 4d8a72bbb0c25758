"""The orders page and the order detail on plain values (a fake API) in the real browser: what
they draw after a `reset`, after a failed refetch, on a search window with no match, and when a
delete finds the order gone.
Found by a review (2026-12-04)."""

SETUP = """
  const { OrdersView } = await import('/assets/orders-view.js');
  const { OrderDetail } = await import('/assets/order-detail.js');
  const row = (id, version, title, extra = {}) => ({
    id, number: '2026/12/' + String(id).padStart(4, '0'), status: 'assigned', driver_id: null, title,
    notes: '', stages: [], documents: [], created_at: '2026-12-01T10:00:00.000Z',
    updated_at: '2026-12-01T10:00:00.000Z', version, ...extra });
  const signal = (fields = {}) => ({ all: false, reset: false, orderIds: new Set(), deletedIds: new Set(),
    createdIds: new Set(), countsChanged: false, ...fields });
  const calls = [];
  const api = {
    pages: [], byIds: [],
    drivers: async () => ({ data: [], changed: true }),
    orderCounts: async () => ({ data: {}, changed: true }),
    orders: async (params) => { calls.push(['orders', params.before ?? null]); const next = api.pages.shift(); if (next instanceof Error) throw next; return next; },
    ordersByIds: async (ids) => { calls.push(['ids', ids]); const next = api.byIds.shift(); if (next instanceof Error) throw next; return next; },
    order: async () => api.detail,
  };
  const main = document.createElement('main');
  document.body.append(main);  // beside the page's own (its confirm dialog stays)
  const view = new OrdersView({ api, feed: { refresh() {} } });
  view.mount(main, { orderId: null, query: {} });
  const titles = () => [...main.querySelectorAll('#orders-table tbody tr')].map((tr) => tr.querySelector('.cell-title').textContent);
"""


def run(page, script):
    page.goto("/")
    return page.evaluate(f"async () => {{ {SETUP} {script} }}")


def test_after_a_reset_the_detail_takes_the_restored_order_even_at_a_lower_version(page, server):
    result = run(page, """
      const root = document.createElement('div');
      document.body.append(root);
      const detail = new OrderDetail({ api, root, drivers: () => new Map(), onChanged: () => {}, onClose: () => {} });
      api.detail = { data: row(5, 4, 'before the restore'), changed: true, etag: '"o5-v4"' };
      await detail.show(5);
      // Within one history a lower version is an older answer arriving late: kept out.
      api.detail = { data: row(5, 3, 'an older answer'), changed: true, etag: '"o5-v3"' };
      await detail.refresh(signal({ all: true }));
      const kept = [detail.order.title, detail.etag];
      // After a reset it is the restored truth: shown, and its tag is what the next save sends.
      api.detail = { data: row(5, 2, 'restored'), changed: true, etag: '"o5-v2"' };
      await detail.refresh(signal({ all: true, reset: true }));
      return { kept, after: [detail.order.title, detail.etag], shown: root.textContent.includes('restored') };
    """)
    assert result["kept"] == ["before the restore", '"o5-v4"'], result
    assert result["after"] == ["restored", '"o5-v2"'], result
    assert result["shown"], result


def test_an_answer_without_the_receipt_shown_does_not_bring_back_not_seen(page, server):
    """Two loads of one order overlap: the one that saw the driver's receipt lands first, then an
    earlier one of the same version without it. "Seen" stays (a review found "Not seen yet" back
    until the next event, and a dispatcher might phone a driver who had seen the change)."""
    result = run(page, """
      const root = document.createElement('div');
      document.body.append(root);
      const detail = new OrderDetail({ api, root, drivers: () => new Map(), onChanged: () => {}, onClose: () => {} });
      const seen = { driver_id: 3, version: 7, at: '2026-12-01T10:05:00.000Z' };
      api.detail = { data: row(5, 7, 'Seen by the driver', { driver_id: 3, seen }), changed: true, etag: '"o5-v7-s7"' };
      await detail.show(5);
      api.detail = { data: row(5, 7, 'Seen by the driver', { driver_id: 3, seen: null }), changed: true, etag: '"o5-v7"' };
      await detail.refresh(signal({ all: true }));
      return { seen: root.querySelector('#detail-seen').dataset.seen, etag: detail.etag };
    """)
    assert result["seen"] != "none", result
    assert result["etag"] == '"o5-v7-s7"', result


def test_after_a_reset_a_row_at_the_same_version_is_drawn_again(page, server):
    result = run(page, """
      api.pages.push({ data: [row(3, 3, 'X before the restore')], next: null });
      await view.refresh(signal({ all: true }));
      const before = titles();
      // The same version with other content: without the reset, an unchanged version keeps its row.
      api.pages.push({ data: [row(3, 3, 'X restored')], next: null });
      await view.refresh(signal({ all: true }));
      const withoutReset = titles();
      api.pages.push({ data: [row(3, 3, 'X restored')], next: null });
      await view.refresh(signal({ all: true, reset: true }));
      return { before, withoutReset, after: titles() };
    """)
    assert result["before"] == ["X before the restore"], result
    assert result["withoutReset"] == ["X before the restore"], result
    assert result["after"] == ["X restored"], result


def test_a_failed_row_refetch_reloads_the_page_at_the_next_signal_and_clears_its_message(page, server):
    result = run(page, """
      api.pages.push({ data: [row(7, 1, 'Alpha'), row(6, 1, 'Bravo')], next: null });
      await view.refresh(signal({ all: true }));
      api.byIds.push(Object.assign(new Error('Service Unavailable'), { status: 503 }));
      await view.refresh(signal({ orderIds: new Set([7]) }));        // Alpha renamed: this fetch fails
      const message = main.querySelector('#orders-error').textContent;
      api.pages.push({ data: [row(7, 2, 'Alpha renamed'), row(6, 2, 'Bravo renamed')], next: null });
      await view.refresh(signal({ orderIds: new Set([6]) }));        // Bravo renamed: the page comes again
      return { message, after: titles(), error: main.querySelector('#orders-error').textContent, calls };
    """)
    assert "Could not refresh" in result["message"], result
    assert result["after"] == ["Alpha renamed", "Bravo renamed"], result
    assert result["error"] == "", result
    assert result["calls"][-1] == ["orders", None], result


def test_a_failed_page_reload_reloads_the_page_at_the_next_signal(page, server):
    """An event's page reload (a new order) that fails, e.g. 429 or 503: the next event, which
    names only a row, must reload the page, or the new order stays out until the poll."""
    result = run(page, """
      api.pages.push({ data: [row(7, 1, 'Alpha')], next: null });
      await view.refresh(signal({ all: true }));
      api.pages.push(Object.assign(new Error('Too many requests'), { status: 429 }));
      await view.refresh(signal({ createdIds: new Set([8]) }));      // Charlie created: the reload fails
      const message = main.querySelector('#orders-error').textContent;
      api.pages.push({ data: [row(8, 1, 'Charlie'), row(7, 2, 'Alpha renamed')], next: null });
      await view.refresh(signal({ orderIds: new Set([7]) }));        // Alpha renamed: the page comes again
      return { message, after: titles(), calls };
    """)
    assert "Could not refresh" in result["message"], result
    assert result["after"] == ["Charlie", "Alpha renamed"], result
    assert result["calls"][-1] == ["orders", None], result


def test_a_failed_older_click_keeps_the_user_on_their_page(page, server):
    """Older fails (429, 503, offline): the user stays on the page on screen, and the next event
    refetches its rows instead of moving them to the page they asked for minutes ago."""
    result = run(page, """
      api.pages.push({ data: [row(9, 1, 'Alpha'), row(8, 1, 'Bravo')], next: 8 });
      await view.refresh(signal({ all: true }));
      api.pages.push(Object.assign(new Error('Too many requests'), { status: 429 }));
      await view.showOlder();
      const state = { before: view.page.before, next: view.page.next, cursors: view.cursors.length,
                      older: main.querySelector('#page-older').disabled };
      api.byIds.push({ data: [row(9, 2, 'Alpha renamed')] });
      await view.refresh(signal({ orderIds: new Set([9]) }));
      return { state, after: titles(), calls };
    """)
    assert result["state"] == {"before": None, "next": 8, "cursors": 0, "older": False}, result
    assert result["after"] == ["Alpha renamed", "Bravo"], result
    assert result["calls"][-1] == ["ids", [9]], result


def test_older_goes_on_past_a_search_window_without_a_match(page, server):
    result = run(page, """
      view.update({ orderId: null, query: { status: 'all', q: 'Zebra' } });
      api.pages.push({ data: [], next: 40101 });
      await view.refresh(signal({ all: true }));
      const first = { titles: titles(), older: main.querySelector('#page-older').disabled,
                      empty: main.querySelector('.empty').textContent };
      api.pages.push({ data: [], next: 30101 });
      await view.showOlder();
      api.pages.push({ data: [row(42, 1, 'Zebra crossing')], next: null });
      await view.showOlder();
      return { first, titles: titles(), count: main.querySelector('#orders-count').textContent, calls };
    """)
    assert result["first"]["titles"] == [] and result["first"]["older"] is False, result
    assert "Older searches further back" in result["first"]["empty"], result
    assert result["titles"] == ["Zebra crossing"], result
    assert result["count"].startswith("Page 3"), result
    assert [c for c in result["calls"] if c[0] == "orders"][-2:] == [["orders", 40101], ["orders", 30101]], result


def test_a_delete_answered_404_shows_the_order_gone_not_an_error(page, server):
    """Behind a proxy that sends a DELETE again (nginx retries it), the first try may have
    committed: the second answers 404. The order is gone, as asked."""
    result = run(page, """
      const root = document.createElement('div');
      document.body.append(root);
      let changed = 0;
      const detail = new OrderDetail({ api, root, drivers: () => new Map(), onChanged: () => { changed += 1; }, onClose: () => {} });
      api.detail = { data: row(5, 4, 'to delete'), changed: true, etag: '"o5-v4"' };
      api.forgetOrder = () => {};
      api.deleteOrder = async () => { throw Object.assign(new Error('Not found.'), { status: 404 }); };
      await detail.show(5);
      const removing = detail.remove();
      document.getElementById('confirm-dialog').close('confirm');
      await removing;
      return { gone: !detail.gone.hidden, error: detail.error.textContent, changed };
    """)
    assert result["gone"] is True, result
    assert result["error"] == "", result
    assert result["changed"] >= 1, result


def test_a_change_during_a_page_load_is_not_drawn_over_by_its_older_answer(page, server):
    """The user paged (a page load in flight), an order was cancelled meanwhile and its event came
    before the page's answer, which the server made before the cancel."""
    result = run(page, """
      view.update({ orderId: null, query: { status: 'all' } });          // the history: cancelled rows stay
      api.pages.push({ data: [row(5, 1, 'Zebra')], next: null });
      await view.refresh(signal({ all: true }));
      let answer, hold = true;
      const pages = api.orders;
      api.orders = (params) => {
        if (!hold) return pages(params);
        hold = false;                                                    // only the first is held
        calls.push(['orders', params.before ?? null]);
        return new Promise((resolve) => { answer = resolve; });
      };
      const loading = view.loadPage();                                   // the user's page load
      api.byIds.push({ data: [row(5, 2, 'Zebra', { status: 'cancelled' })] });
      api.pages.push({ data: [row(5, 2, 'Zebra', { status: 'cancelled' })], next: null });
      await view.refresh(signal({ orderIds: new Set([5]) }));            // the cancel's event
      answer({ data: [row(5, 1, 'Zebra')], next: null });                // made before the cancel
      await loading;
      const status = main.querySelector('#orders-table tbody tr .badge').textContent;
      return { status, loads: calls.filter((c) => c[0] === 'orders').length };
    """)
    assert result["status"] == "Cancelled", result
    assert result["loads"] == 3, result


def test_an_order_changed_while_older_loads_is_not_left_stale_on_the_older_page(page, server):
    """The user clicked Older; the server made page 2 with order 30 still as it was, then order 30
    was cancelled and its event came before the page's answer. The page on screen during the load
    is page 1, whose bounds do not hold 30, so the event was used up and page 2 showed order 30
    as before until the 120 s poll (found by a review)."""
    result = run(page, """
      view.update({ orderId: null, query: { status: 'all' } });
      api.pages.push({ data: [row(90, 1, 'Newest'), row(60, 1, 'Page one')], next: 51 });
      await view.refresh(signal({ all: true }));
      let answer, hold = true;
      const pages = api.orders;
      api.orders = (params) => {
        if (!hold) return pages(params);
        hold = false;                                                    // only Older's is held
        calls.push(['orders', params.before ?? null]);
        return new Promise((resolve) => { answer = resolve; });
      };
      const moving = view.showOlder();
      api.pages.push({ data: [row(30, 2, 'Zebra', { status: 'cancelled' })], next: null });
      await view.refresh(signal({ orderIds: new Set([30]) }));           // the cancel's event
      answer({ data: [row(30, 1, 'Zebra')], next: null });               // made before the cancel
      await moving;
      const status = main.querySelector('#orders-table tbody tr .badge').textContent;
      return { status, loads: calls.filter((c) => c[0] === 'orders') };
    """)
    assert result["status"] == "Cancelled", result
    assert result["loads"] == [["orders", None], ["orders", 51], ["orders", 51]], result


def test_once_the_older_page_is_drawn_only_its_own_orders_reload_it(page, server):
    """After Older the page loads once more for a change that came during the move; during that
    reload the page on screen is the new one, so an order on a page further back (id 10, below this
    page's floor 31) does not make it load yet again (counted as on the page coming, every event on
    a busy company chained reloads, and Older and Newer ignored clicks meanwhile; a review)."""
    result = run(page, """
      view.update({ orderId: null, query: { status: 'all' } });
      api.pages.push({ data: [row(90, 1, 'Newest'), row(60, 1, 'Page one')], next: 51 });
      await view.refresh(signal({ all: true }));
      const answers = [];
      let held = 2;
      const pages = api.orders;
      api.orders = (params) => {
        if (held === 0) return pages(params);
        held -= 1;
        calls.push(['orders', params.before ?? null]);
        return new Promise((resolve) => { answers.push(resolve); });
      };
      const moving = view.showOlder();
      await view.refresh(signal({ orderIds: new Set([40]) }));           // during the move
      answers[0]({ data: [row(40, 1, 'Forty'), row(35, 1, 'Thirty-five')], next: 31 });
      while (answers.length < 2) await new Promise((r) => setTimeout(r, 5));  // the reload it owes
      api.pages.push({ data: [row(40, 2, 'Forty'), row(35, 1, 'Thirty-five')], next: 31 });  // a third, if asked
      await view.refresh(signal({ orderIds: new Set([10]) }));           // on a page further back
      answers[1]({ data: [row(40, 2, 'Forty'), row(35, 1, 'Thirty-five')], next: 31 });
      await moving;
      return { loads: calls.filter((c) => c[0] === 'orders'), older: main.querySelector('#page-older').disabled };
    """)
    assert result["loads"] == [["orders", None], ["orders", 51], ["orders", 51]], result


def test_the_etag_cache_keeps_a_bounded_number_of_answers(page, server):
    """Every typed search and page visited was kept until logout."""
    page.goto("/")
    result = page.evaluate("""async () => {
      const { Api, MAX_CACHED } = await import('/assets/api.js');
      const fetchImpl = async (path) => new Response(JSON.stringify([{ id: 1 }]),
        { status: 200, headers: { 'Content-Type': 'application/json', ETag: '"t-' + path.length + '"' } });
      const api = new Api({ getToken: () => 't', fetchImpl });
      for (let i = 0; i < MAX_CACHED + 50; i++) await api.get('/api/orders/?q=' + 'x'.repeat(i + 1));
      const size = api.etags.size;
      await api.get('/api/orders/?q=x');                // evicted long ago: asked for again, kept
      return { size, max: MAX_CACHED, newest: api.etags.has('/api/orders/?q=x') };
    }""")
    assert result["size"] == result["max"], result
    assert result["newest"] is True, result


def test_paging_clicks_before_the_page_is_in_are_ignored(page, server):
    """Newer twice, or Newer then Older, before the page is in: one move, and the label matches
    the rows (a double click on Newer skipped a page; found by a review)."""
    result = run(page, """
      view.update({ orderId: null, query: { status: 'all' } });
      api.pages.push({ data: [row(90, 1, 'Page one')], next: 500 });
      await view.refresh(signal({ all: true }));
      api.pages.push({ data: [row(40, 1, 'Page two')], next: 300 });
      await view.showOlder();
      api.pages.push({ data: [row(20, 1, 'Page three')], next: 100 });
      await view.showOlder();
      api.pages.push({ data: [row(40, 1, 'Page two again')], next: 300 });
      api.pages.push({ data: [row(90, 1, 'Never asked for')], next: 500 });
      const first = view.showNewer(), second = view.showNewer(), third = view.showOlder();
      await first; await second; await third;
      return { titles: titles(), count: main.querySelector('#orders-count').textContent, calls };
    """)
    assert result["titles"] == ["Page two again"], result
    assert result["count"].startswith("Page 2"), result
    assert [c for c in result["calls"] if c[0] == "orders"] == [["orders", None], ["orders", 500], ["orders", 300], ["orders", 500]], result


def test_a_second_click_on_older_before_the_page_is_in_is_one_page_not_two(page, server):
    """A double click on Older pushed the same cursor twice: "Page 3" over page 2's rows, and
    Newer then showed page 2 again (found by a review)."""
    result = run(page, """
      view.update({ orderId: null, query: { status: 'all' } });
      api.pages.push({ data: [row(90, 1, 'Newest')], next: 500 });
      await view.refresh(signal({ all: true }));
      api.pages.push({ data: [row(40, 1, 'Older one')], next: null });
      api.pages.push({ data: [row(30, 1, 'Never asked for')], next: null });
      const first = view.showOlder(), second = view.showOlder();  // the second click, before the page is in
      await first; await second;
      const older = { titles: titles(), count: main.querySelector('#orders-count').textContent };
      api.pages.length = 0;  // the page a second load would have taken
      api.pages.push({ data: [row(90, 1, 'Newest')], next: 500 });
      await view.showNewer();
      return { older, titles: titles(), newer: main.querySelector('#page-newer').disabled, calls };
    """)
    assert result["older"]["titles"] == ["Older one"], result
    assert result["older"]["count"].startswith("Page 2"), result
    assert [c for c in result["calls"] if c[0] == "orders"] == [["orders", None], ["orders", 500], ["orders", None]], result
    assert result["titles"] == ["Newest"] and result["newer"] is True, result
