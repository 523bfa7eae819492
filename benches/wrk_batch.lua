-- wrk script: POST /v1/batch as NDJSON, BATCH messages a request, every message with a fresh
-- messageId (so nothing is stored as a duplicate), from any NDJSON file of Segment messages —
-- `stowage bench gen --mix M`'s, or a mix of your own or your SDK's.
--
--   STOWAGE_TOKEN=stw_evt_... WRK_EVENTS=/tmp/events.ndjson WRK_BATCH=500 \
--     wrk -t1 -c16 -d10s -s benches/wrk_batch.lua http://127.0.0.1:8080
--
-- Environment: STOWAGE_TOKEN (sent as X-Auth-Token); WRK_EVENTS, the NDJSON file (required;
-- a line without a messageId gets none); WRK_BATCH (default 500) messages a request, cut into
-- at most 64 distinct bodies taken round robin; WRK_BYTES_MAX (default 491520, 480 KiB) ends a
-- body early so that wide messages fit the default body limit, as an SDK would.
-- At the end it prints one line `WRK_JSON {...}` (requests, events, events/s, p50/p99/max ms,
-- non-2xx, socket errors) for benches/compare_batch.sh to read.

local token = os.getenv("STOWAGE_TOKEN") or ""
local batch = tonumber(os.getenv("WRK_BATCH") or "500")
local bytes_max = tonumber(os.getenv("WRK_BYTES_MAX") or "491520")
local file = assert(os.getenv("WRK_EVENTS"), "WRK_EVENTS: an NDJSON file of messages")
local headers = { ["Content-Type"] = "application/x-ndjson", ["X-Auth-Token"] = token }

local function random_hex(n)
  local f = io.open("/dev/urandom", "rb")
  local raw = f and f:read(n) or tostring(os.time())
  if f then f:close() end
  return (raw:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- Each body's messageIds become "\1-<n>": a request replaces the \1 with its own prefix.
local bodies, sizes = {}, {}
local lines, size, n = {}, 0, 0
local function close_body()
  if #lines > 0 then
    table.insert(bodies, table.concat(lines, "\n") .. "\n")
    table.insert(sizes, #lines)
  end
  lines, size = {}, 0
end
for line in io.lines(file) do
  if #bodies >= 64 then break end
  if #lines > 0 and (#lines >= batch or size + #line + 1 > bytes_max) then close_body() end
  if #bodies >= 64 then break end
  n = n + 1
  local _, open = line:find('"messageId"%s*:%s*"')
  local close = open and line:find('"', open + 1, true)
  if close then
    line = line:sub(1, open) .. "\1-" .. n .. line:sub(close)
  end
  table.insert(lines, line)
  size = size + #line + 1
end
close_body()
assert(#bodies > 0, "WRK_EVENTS: no messages in " .. file)
-- A short last body (the file ran out) would skew the events/s figure: dropped.
if #bodies > 1 and sizes[#sizes] < sizes[1] then
  table.remove(bodies)
  table.remove(sizes)
end

-- Each body cut at its "\1"s once, so that a request joins the pieces around its prefix in
-- one `table.concat` (a `gsub` over every 100 KiB body took wrk ~40 % of a core at 480 req/s).
local pieces = {}
for k, body in ipairs(bodies) do
  local parts, from = {}, 1
  while true do
    local at = body:find("\1", from, true)
    if not at then break end
    table.insert(parts, body:sub(from, at - 1))
    from = at + 1
  end
  table.insert(parts, body:sub(from))
  pieces[k] = parts
end

local run = random_hex(8)
local counter = 0
tid = 0
local next_tid = 0
function setup(thread)
  next_tid = next_tid + 1
  thread:set("tid", next_tid)
end

function request()
  counter = counter + 1
  local k = counter % #bodies + 1
  local prefix = string.format("wrkb-%s-%d-%d", run, tid, counter)
  local body = table.concat(pieces[k], prefix)
  return wrk.format("POST", "/v1/batch", headers, body)
end

-- Events/s: answered requests times the mean messages a body holds (the bodies go round robin;
-- they differ only where WRK_BYTES_MAX cut them).
function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local total = 0
  for _, s in ipairs(sizes) do total = total + s end
  local mean = total / #sizes
  local e = summary.errors
  local ok = summary.requests - e.status
  io.write(string.format(
    'WRK_JSON {"requests":%d,"ok":%d,"per_request":%.1f,"events_per_s":%.1f,"duration_s":%.3f,'
      .. '"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"non_2xx":%d,"socket_errors":%d}\n',
    summary.requests, ok, mean, ok * mean / secs, secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.status, e.connect + e.read + e.write + e.timeout))
end
