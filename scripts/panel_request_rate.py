"""How many API requests one web-panel tab makes while its company is busy (docs/BENCHMARKS.md,
"2026-12-05"; the per-user request budget is shared by every tab of a login: docs/HARDENING.md).

    .venv-browser/bin/python scripts/panel_request_rate.py BIN PORT WRITES_PER_S SECONDS detail|list

Starts BIN (`waybill serve`, the request limit off) on 127.0.0.1:PORT in a temp folder, seeds 10
drivers x 5 orders, logs one Chromium tab in as the dispatcher (with `detail`: an order open), then
PATCHes the orders round-robin at WRITES_PER_S with the dispatcher's token and counts the tab's
`/api/` requests for SECONDS. `.venv-browser` is made by `make browser-test`. Prints one JSON line."""
import json, os, shutil, subprocess, sys, tempfile, threading, time, urllib.request
from playwright.sync_api import sync_playwright, expect

BIN, PORT, RATE, SECONDS, DETAIL = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "detail"
data = tempfile.mkdtemp()
server = subprocess.Popen([BIN, "serve", "--port", str(PORT), "--data-dir", data, "--user-requests-per-second", "0"],
                          stderr=open(os.path.join(data, "log"), "w"))
base = f"http://127.0.0.1:{PORT}"
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/healthz", timeout=1); break
    except Exception: time.sleep(0.1)
subprocess.run([BIN, "seed", "--data-dir", data, "--drivers", "10", "--orders-per-driver", "5", "--password-iterations", "1000",
                "--out", os.path.join(data, "seed.json")], check=True, capture_output=True)
seed = json.load(open(os.path.join(data, "seed.json")))
token = seed["dispatcher_token"]
orders = [o for d in seed["drivers"] for o in d["order_ids"]]
stop = False
def writer():
    n = 0
    while not stop:
        oid = orders[n % len(orders)]
        req = urllib.request.Request(f"{base}/api/orders/{oid}/", data=json.dumps({"notes": f"n{n}"}).encode(), method="PATCH",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try: urllib.request.urlopen(req, timeout=5).read()
        except Exception as e: print("write failed", e)
        n += 1
        time.sleep(1 / RATE)
counts = []
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium"), args=["--no-sandbox"])
    page = browser.new_page(base_url=base)
    page.on("request", lambda r: counts.append((time.time(), r.url)) if "/api/" in r.url else None)
    page.goto("/")
    expect(page.locator("#login-email")).to_be_focused()
    page.keyboard.type(seed["dispatcher"]["email"]); page.keyboard.press("Tab")
    page.keyboard.type(seed["dispatcher"]["password"]); page.keyboard.press("Enter")
    expect(page.locator("#orders-table tbody tr").first).to_be_visible(timeout=10000)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=10000)
    if DETAIL:
        page.locator("#orders-table tbody tr").first.click()
    page.wait_for_timeout(2000)
    t = threading.Thread(target=writer); t.start()
    page.wait_for_timeout(2000)
    start = time.time(); counts.clear()
    page.wait_for_timeout(SECONDS * 1000)
    window = [u for (ts, u) in counts if ts >= start]
    stop = True; t.join()
    browser.close()
server.terminate(); server.wait()
shutil.rmtree(data, ignore_errors=True)
kinds = {}
for u in window:
    key = "ids" if "ids=" in u else ("counts" if "counts" in u else ("detail" if u.rstrip("/").split("/")[-1].isdigit() else "other"))
    kinds[key] = kinds.get(key, 0) + 1
print(json.dumps({"write_rate": RATE, "seconds": SECONDS, "detail_open": DETAIL, "panel_api_requests": len(window),
                  "per_second": round(len(window) / SECONDS, 1), "by_kind": kinds}))
