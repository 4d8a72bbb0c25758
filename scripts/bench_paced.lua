-- Paced PATCH load for `scripts/bench.sh paced RATE SECONDS`: wrk sends `PATCH /api/orders/<id>/`
-- ({"notes": ...}, one order_updated event each, to the order's driver) on a fixed schedule, not as
-- fast as answers come back. The Python harness cannot offer 2 000 writes/s on this 2-core machine
-- (its own schedule lag reaches seconds: docs/BENCHMARKS.md), wrk in C can.
--
-- Open loop per wrk thread: request slots every `interval` ms, claimed in turn by whichever
-- connection is free, so a slow answer does not lower the offered rate while connections remain.
-- wrk's `delay()` takes whole milliseconds; slots are kept as fractions, so the rate is exact.
-- wrk's answer latency starts when a request is sent: a slot that waited for a free connection shows
-- in the late-slot count only. "errors" counts answers ≥ 400 and socket errors.
-- Arguments (after `--`): the generated fixtures file (Lua: ids, token), the interval in ms.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } waybill_timespec;
int clock_gettime(int clock_id, waybill_timespec *tp);
]]
local timespec = ffi.new("waybill_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, timespec) -- CLOCK_MONOTONIC
  return tonumber(timespec.tv_sec) * 1000 + tonumber(timespec.tv_nsec) / 1e6
end

local ids, token, interval, next_slot
sent, late = 0, 0 -- globals: `done` reads them from each thread
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_index", #threads) -- each thread seeds its own order ids
end

function init(args)
  local fixtures = dofile(args[1])
  ids, token, interval = fixtures.ids, fixtures.token, tonumber(args[2])
  math.randomseed(os.time() * 1000 + (thread_index or 0))
end

function delay()
  local now = now_ms()
  next_slot = (next_slot or now) + interval
  local wait = next_slot - now
  if wait < 0 then
    late = late + 1 -- the slot passed before a connection was free
    return 0
  end
  return math.floor(wait)
end

-- WAYBILL_PACED_GET=PATH sends GETs of PATH instead ("ID" in it becomes a random order id), with
-- the same token: what a request costs the server without a write (docs/BENCHMARKS.md).
local get_path = os.getenv("WAYBILL_PACED_GET")

function request()
  sent = sent + 1
  local id = ids[math.random(#ids)]
  if get_path and get_path ~= "" then
    return wrk.format("GET", (get_path:gsub("ID", tostring(id))), { ["Authorization"] = "Bearer " .. token })
  end
  return wrk.format("PATCH", "/api/orders/" .. id .. "/",
    { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" },
    '{"notes":"paced ' .. sent .. '"}')
end

function done(summary, latency, requests)
  local late_slots = 0
  for _, thread in ipairs(threads) do late_slots = late_slots + (thread:get("late") or 0) end
  io.write(string.format("errors: %d of %d; answer p50 %.2f ms, p99 %.2f ms, max %.2f ms; late slots %d\n",
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.requests, latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000, late_slots))
end
