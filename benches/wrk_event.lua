-- wrk script: POST /v1/event with realistic Segment `track` messages and a unique messageId per
-- request: a random run id read from /dev/urandom, the wrk thread number and a per-thread
-- counter, so two runs never collide.
--
--   stowage bench gen --events 1024 --out /tmp/events.ndjson
--   STOWAGE_TOKEN=stw_evt_... WRK_EVENTS=/tmp/events.ndjson \
--     wrk -t1 -c64 -d10s -s benches/wrk_event.lua http://127.0.0.1:8080
--
-- Environment: STOWAGE_TOKEN (sent as X-Auth-Token); WRK_EVENTS, an NDJSON file of messages
-- (`stowage bench gen` writes the very events `stowage bench ingest` sends, so both load
-- generators send the same shapes), used round robin with their messageId replaced; without
-- it, three built-in messages of the same shape; WRK_PATH (default /v1/event).
-- At the end it prints one line `WRK_JSON {...}` (requests, req/s, p50/p99/max in ms, non-2xx,
-- socket errors) for benches/compare_ingest.sh to read.

local token = os.getenv("STOWAGE_TOKEN") or ""
local path = os.getenv("WRK_PATH") or "/v1/event"

local function random_hex(bytes)
  local f = io.open("/dev/urandom", "rb")
  local raw = f and f:read(bytes) or tostring(os.time())
  if f then f:close() end
  return (raw:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- Every wrk thread runs this file in its own Lua state, so each reads its own run id; `tid`
-- (set in setup) keeps the threads apart as well.
local run = random_hex(8)
local now = os.date("!%Y-%m-%dT%H:%M:%S", os.time()) .. ".123Z"
local headers = { ["Content-Type"] = "application/json", ["X-Auth-Token"] = token }

local context = '"context":{"library":{"name":"analytics.js","version":"4.1.0"},'
  .. '"ip":"203.0.113.7","userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) '
  .. 'AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15","locale":"en-US",'
  .. '"timezone":"Europe/London","page":{"path":"/product","referrer":"https://www.example.com/"}}'

-- %s = messageId; each body is a complete track message.
local templates = {
  '{"type":"track","event":"Product Viewed","messageId":"%s",'
    .. '"anonymousId":"4f2a9c1e-77b0-4d1a-a3f2-0c9e8b7a6d5c","userId":"user_4711",'
    .. '"timestamp":"' .. now .. '","properties":{"product_id":"prod_1234","sku":"SKU-01234",'
    .. '"category":"Shoes","brand":"Acme","price":89.95,"currency":"USD","position":3,'
    .. '"in_stock":true,"rating":4.5},' .. context .. '}',
  '{"type":"track","event":"Products Searched","messageId":"%s",'
    .. '"anonymousId":"9b1d3e5f-0a2c-4e6b-8d0f-1a3c5e7a9b1d",'
    .. '"timestamp":"' .. now .. '","properties":{"query":"running shoes","results":124,'
    .. '"page":1,"filters":{"category":"Shoes","price_max":150.0,"in_stock_only":true}},'
    .. context .. '}',
  '{"type":"track","event":"Order Completed","messageId":"%s",'
    .. '"anonymousId":"0c9e8b7a-6d5c-4f2a-9c1e-77b04d1aa3f2","userId":"user_815",'
    .. '"timestamp":"' .. now .. '","properties":{"order_id":"ord_8c1f2a","revenue":129.9,'
    .. '"tax":10.4,"shipping":4.99,"currency":"EUR","coupon":null,'
    .. '"payment":{"method":"card","installments":1},'
    .. '"products":[{"product_id":"prod_1234","price":89.95,"quantity":1}]},' .. context .. '}',
}

-- Messages from WRK_EVENTS, split around their messageId value: { before, after }.
local file = os.getenv("WRK_EVENTS")
if file and file ~= "" then
  local parts = {}
  for line in io.lines(file) do
    local _, open = line:find('"messageId":"', 1, true)
    local close = open and line:find('"', open + 1, true)
    if close then
      table.insert(parts, { line:sub(1, open), line:sub(close) })
    end
  end
  assert(#parts > 0, "WRK_EVENTS: no line with a messageId in " .. file)
  templates = {}
  for i, p in ipairs(parts) do
    templates[i] = p[1]:gsub("%%", "%%%%") .. "%s" .. p[2]:gsub("%%", "%%%%")
  end
end

local counter = 0
tid = 0

local next_tid = 0
function setup(thread)
  next_tid = next_tid + 1
  thread:set("tid", next_tid)
end

function request()
  counter = counter + 1
  local id = string.format("wrk-%s-%d-%d", run, tid, counter)
  local body = string.format(templates[counter % #templates + 1], id)
  return wrk.format("POST", path, headers, body)
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_s":%.3f,"requests_per_s":%.1f,"p50_ms":%.3f,'
      .. '"p99_ms":%.3f,"max_ms":%.3f,"non_2xx":%d,"socket_errors":%d}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
