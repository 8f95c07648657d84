-- wrk script for bench/callback_throughput.py.
--
--   wrk -t C -c C -d 600s -s bench/wrk_bodies.lua URL -- BODIES_FILE SHARE SHARES C
--
-- One connection per thread, so each answer is paired with its request and timed here exactly
-- (wrk's own latency figures would mix in the requests a thread sends while it awaits its last).
--
-- With BODIES_FILE "-" every request is a plain GET of URL (the empty request), for the whole run.
-- Otherwise each line of BODIES_FILE is one POST (tab-separated: header name, value, ..., then the
-- body, which holds no tab or newline); lines are dealt to this wrk process (SHARE of SHARES, from
-- 0) and then to its threads. Each body is sent exactly once: a thread that has its answers stops
-- and prints "thread-done", so the caller can end wrk (SIGINT) without waiting for -d; "progress"
-- every 20 answers lets it end a wrk whose answers stopped coming (a request lost or timed out).
-- At the end one line "result {json}" gives, per thread, the clock of its first request and last
-- answer (CLOCK_MONOTONIC, microseconds), its answers by status and each answer's latency.

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock, bench_timespec *tp);
]]
local timespec = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, timespec) -- CLOCK_MONOTONIC: comparable across processes
  return tonumber(timespec.tv_sec) * 1000000 + math.floor(tonumber(timespec.tv_nsec) / 1000)
end

local threads = {}
local thread_count = 0

function setup(thread)
  thread:set("thread_index", thread_count)
  thread_count = thread_count + 1
  table.insert(threads, thread)
end

function init(args)
  -- Globals of this thread, read back by done() through thread:get.
  first_us, last_us, answered, statuses = 0, 0, 0, ""
  sent_us, latencies, latency_text = 0, {}, ""
  status_counts = {}
  prepared = {}
  sent = 0
  local path, share, shares = args[1], tonumber(args[2] or "0"), tonumber(args[3] or "1")
  empty = (path == nil or path == "-")
  if empty then
    return
  end
  local threads_here = tonumber(args[4] or "1")
  local line_index = 0
  local mine = 0
  for line in io.lines(path) do
    if line_index % shares == share then
      if mine % threads_here == thread_index then
        local fields = {}
        for field in string.gmatch(line, "[^\t]+") do
          table.insert(fields, field)
        end
        local body = table.remove(fields)
        local headers = { ["Content-Type"] = "application/json" }
        for i = 1, #fields, 2 do
          headers[fields[i]] = fields[i + 1]
        end
        table.insert(prepared, wrk.format("POST", nil, headers, body))
      end
      mine = mine + 1
    end
    line_index = line_index + 1
  end
  if #prepared == 0 then
    io.write("thread-done\n")
    io.flush()
  end
end

-- Before the run wrk calls request() once on its first thread, only to check what it returns:
-- that call must not use up a body (it would never be sent) nor start the clock.
local checked = false

function request()
  if thread_index == 0 and not checked then
    checked = true
    if empty then
      return wrk.request()
    end
    return prepared[1] or wrk.format("GET", "/healthz")
  end
  sent_us = now_us()
  if first_us == 0 then
    first_us = sent_us
  end
  if empty then
    return wrk.request()
  end
  sent = sent + 1
  if sent <= #prepared then
    return prepared[sent]
  end
  -- Nothing left to send while the last answers are awaited: a cheap request no one counts.
  return wrk.format("GET", "/healthz")
end

local FILLER_ANSWER = '{"status": "ok"}'

function response(status, headers, body)
  if not empty and (answered >= #prepared or body == FILLER_ANSWER) then
    wrk.thread:stop() -- a filler's answer: this thread has nothing left to send
    return
  end
  answered = answered + 1
  last_us = now_us()
  latencies[answered] = last_us - sent_us
  status_counts[status] = (status_counts[status] or 0) + 1
  local parts = {}
  for code, count in pairs(status_counts) do
    table.insert(parts, '"' .. code .. '":' .. count)
  end
  statuses = "{" .. table.concat(parts, ",") .. "}"
  local finished = not empty and answered == #prepared
  if answered % 50 == 0 or finished then
    latency_text = table.concat(latencies, ",") -- what done() can read (strings cross threads)
  end
  if answered % 20 == 0 then
    io.write("progress\n") -- the caller ends a wrk whose answers stall (a lost or timed-out click)
    io.flush()
  end
  if finished then
    io.write("thread-done\n")
    io.flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local per_thread = {}
  for _, thread in ipairs(threads) do
    table.insert(
      per_thread,
      string.format(
        '{"first_us":%d,"last_us":%d,"answered":%d,"statuses":%s,"latencies_us":[%s]}',
        thread:get("first_us"),
        thread:get("last_us"),
        thread:get("answered"),
        thread:get("statuses") ~= "" and thread:get("statuses") or "{}",
        thread:get("latency_text")
      )
    )
  end
  io.write(
    string.format(
      'result {"threads":[%s],"socket_errors":%d,"timeouts":%d}\n',
      table.concat(per_thread, ","),
      summary.errors.connect + summary.errors.read + summary.errors.write,
      summary.errors.timeout
    )
  )
end
