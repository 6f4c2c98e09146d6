"""Every Redis key and every Lua script of the run queue, in one place.

Over 400 lines: the queue's Lua scripts share one prelude and one key layout, and are
read against it.

All keys of one queue share the hash tag ``{<queue>}`` so that the scripts,
which touch several keys atomically, also work on Redis Cluster. Scripts
read the clock with ``TIME`` (the server's clock, the same for every pod) and
need Redis >= 6.2.

Layout, for prefix ``tickwork`` and queue ``default``::

    tickwork:{default}:messages     HASH  run ID -> message JSON (identity only)
    tickwork:{default}:ready        LIST  run IDs; LPUSH to enqueue, RPOP to claim
    tickwork:{default}:ready:high   LIST  the same, for runs of priority High ...
    tickwork:{default}:ready:low    LIST  ... and Low (ready itself holds Normal runs)
    tickwork:{default}:ready:turn   STRING claims made while High or Low runs waited: whose
                                          turn the next one is (PRIORITY_TURNS)
    tickwork:{default}:inflight     ZSET  run ID -> lease deadline
    tickwork:{default}:leases       HASH  run ID -> lease token of its holder
    tickwork:{default}:delayed      ZSET  run ID -> when a retry becomes ready
    tickwork:{default}:dead         ZSET  run ID -> when it was buried
    tickwork:{default}:dead_errors  HASH  run ID -> why it was buried
    tickwork:{default}:done         ZSET  run ID -> when it was acknowledged (dedup window)
    tickwork:{default}:cancelled    SET   run IDs withdrawn while ready (dropped at claim)
    tickwork:{default}:notify       LIST  wake-up tokens for consumers blocked in BLPOP
    tickwork:{default}:server       HASH  run_id of the Redis process the reaper last saw,
                                          and since when (the grace after a restart)

Concurrency keys (only written for runs whose job names ``spec.concurrency``)::

    tickwork:{default}:key_owners   HASH  run ID -> its concurrency key (``<ns>/<key>``),
                                          for runs in flight that hold one of its places
    tickwork:{default}:key_held     HASH  concurrency key -> its runs in flight
    tickwork:{default}:key_waiting  HASH  concurrency key -> its runs waiting for a place
    tickwork:{default}:key_waiting:<key> LIST run IDs waiting for a place of <key>, in
                                          order; LPUSH to wait, RPOP to return

Notifications (only written when a job names ``spec.notify``)::

    tickwork:{default}:notices      ZSET  "<run ID>/<event>" -> when it was told (each once;
                                          kept a day)
    tickwork:{default}:notice_rate  HASH  namespace -> "<minute>:<notices told in it>"

Fair shares (only written when a consumer claims with a :class:`FairShare`)::

    tickwork:{default}:owners       HASH  run ID -> namespace, for runs counted in flight
    tickwork:{default}:shares       HASH  namespace -> its runs in flight
    tickwork:{default}:parked       HASH  namespace -> its runs parked
    tickwork:{default}:parked:<ns>  LIST  run IDs of namespace <ns> that were claimable while
                                          it was at its limit; LPUSH to park, RPOP to return
    tickwork:{default}:parked_runs  ZSET  every parked run ID -> when it was parked (one key
                                          whose size an autoscaler such as KEDA can read)
    tickwork:{default}:pace         HASH  namespace -> theoretical arrival time of its next
                                          run (GCRA), for runs-per-minute limits
    tickwork:{default}:paced        SET   run IDs delayed by their namespace's rate, which
                                          hold a reserved start (not counted again)
    tickwork:{default}:consumers    ZSET  consumer -> until when it counts as alive
    tickwork:{default}:consumer_slots HASH consumer -> its slots (a share of them is a
                                          namespace's limit)

Every run leaving the in-flight set (ack, retry, bury, release, reap) frees its
namespace's slot and returns that namespace's oldest parked run to the claim end
of ``ready``. The per-namespace lists are named from the ``parked`` key inside the
scripts; they share the hash tag, so they live in the same Cluster slot.

Why one long module (~560 lines): the Lua scripts are here verbatim, each
next to the key layout it assumes; Redis runs them as one unit each, and a
reviewer checks a script against this layout, not across files.
"""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.queue.messages import PRIORITY_TURNS

#: How many wake-up tokens are kept at most; more would only wake idle consumers.
NOTIFY_LIMIT = 1000


@dataclass(frozen=True)
class QueueKeys:
    prefix: str
    queue: str

    def _key(self, name: str) -> str:
        return f"{self.prefix}:{{{self.queue}}}:{name}"

    @property
    def messages(self) -> str:
        return self._key("messages")

    @property
    def ready(self) -> str:
        return self._key("ready")

    @property
    def inflight(self) -> str:
        return self._key("inflight")

    @property
    def leases(self) -> str:
        return self._key("leases")

    @property
    def delayed(self) -> str:
        return self._key("delayed")

    @property
    def dead(self) -> str:
        return self._key("dead")

    @property
    def dead_errors(self) -> str:
        return self._key("dead_errors")

    @property
    def done(self) -> str:
        return self._key("done")

    @property
    def cancelled(self) -> str:
        return self._key("cancelled")

    @property
    def notify(self) -> str:
        return self._key("notify")

    @property
    def server(self) -> str:
        return self._key("server")

    @property
    def notices(self) -> str:
        return self._key("notices")

    @property
    def notice_rate(self) -> str:
        return self._key("notice_rate")

    @property
    def owners(self) -> str:
        return self._key("owners")

    @property
    def shares(self) -> str:
        return self._key("shares")

    @property
    def parked(self) -> str:
        return self._key("parked")

    @property
    def pace(self) -> str:
        return self._key("pace")

    @property
    def paced(self) -> str:
        return self._key("paced")

    @property
    def parked_runs(self) -> str:
        return self._key("parked_runs")

    @property
    def consumers(self) -> str:
        return self._key("consumers")

    @property
    def consumer_slots(self) -> str:
        return self._key("consumer_slots")

    @property
    def ready_high(self) -> str:
        return self._key("ready:high")

    @property
    def ready_low(self) -> str:
        return self._key("ready:low")

    @property
    def ready_turn(self) -> str:
        return self._key("ready:turn")

    @property
    def key_owners(self) -> str:
        return self._key("key_owners")

    @property
    def key_held(self) -> str:
        return self._key("key_held")

    @property
    def key_waiting(self) -> str:
        return self._key("key_waiting")

    @property
    def slots(self) -> list[str]:
        """The keys every script that frees an in-flight run's slot takes last."""
        return [
            self.owners,
            self.shares,
            self.parked,
            self.ready,
            self.notify,
            self.parked_runs,
            self.messages,
            self.key_owners,
            self.key_held,
            self.key_waiting,
        ]

    def all(self) -> list[str]:
        return [
            self.messages,
            self.ready,
            self.ready_high,
            self.ready_low,
            self.ready_turn,
            self.inflight,
            self.leases,
            self.delayed,
            self.dead,
            self.dead_errors,
            self.done,
            self.cancelled,
            self.notify,
            self.server,
            self.owners,
            self.shares,
            self.parked,
            self.pace,
            self.paced,
            self.parked_runs,
            self.consumers,
            self.consumer_slots,
            self.key_owners,
            self.key_held,
            self.key_waiting,
        ]


_PRELUDE = f"""
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function notify(key, count)
  for _ = 1, math.min(count, {NOTIFY_LIMIT}) do redis.call('LPUSH', key, '1') end
  redis.call('LTRIM', key, 0, {NOTIFY_LIMIT - 1})
end
-- Priorities: High and Low runs wait in ready..':high' and ready..':low', Normal ones
-- in ready itself. The list a run goes back to (released, reaped, promoted, returned
-- from parking or from the dead letters), from its message.
local function ready_of(ready, messages, id)
  local raw = redis.call('HGET', messages, id)
  if raw then
    local level = cjson.decode(raw)['priority']
    if level == 'High' then return ready .. ':high' end
    if level == 'Low' then return ready .. ':low' end
  end
  return ready
end
-- The run to claim next while High or Low runs wait (CLAIM asks once per call; with
-- only Normal runs it pops ready, as ever): the round's turn ({PRIORITY_TURNS}), or the
-- highest level with runs waiting when the turn's level has none.
local function pop_ready(ready)
  local high, low = ready .. ':high', ready .. ':low'
  local turn = (redis.call('INCR', ready .. ':turn') - 1) % {len(PRIORITY_TURNS)} + 1
  local level = string.sub('{PRIORITY_TURNS}', turn, turn)
  local order = {{high, ready, low}}
  if level == 'N' then order = {{ready, high, low}} end
  if level == 'L' then order = {{low, high, ready}} end
  for _, list in ipairs(order) do
    local id = redis.call('RPOP', list)
    if id then return id end
  end
  return false
end
local function decrement(hash, field)
  if redis.call('HINCRBY', hash, field, -1) <= 0 then redis.call('HDEL', hash, field) end
end
-- A run leaves the in-flight set: if it was counted for its namespace's fair share,
-- free the slot and return that namespace's oldest parked run to the claim end of
-- ready. s: the index in KEYS of owners (then shares, parked, ready, notify,
-- parked_runs, messages, key_owners, key_held, key_waiting). A run that held a place
-- of its concurrency key gives it up, and the key's oldest waiting run returns too.
local function free_slot(s, id)
  local held = redis.call('HGET', KEYS[s + 7], id)
  if held then
    redis.call('HDEL', KEYS[s + 7], id)
    decrement(KEYS[s + 8], held)
    local next_run = redis.call('RPOP', KEYS[s + 9] .. ':' .. held)
    if next_run then
      decrement(KEYS[s + 9], held)
      redis.call('RPUSH', ready_of(KEYS[s + 3], KEYS[s + 6], next_run), next_run)
      notify(KEYS[s + 4], 1)
    end
  end
  local ns = redis.call('HGET', KEYS[s], id)
  if not ns then return end
  redis.call('HDEL', KEYS[s], id)
  decrement(KEYS[s + 1], ns)
  local back = redis.call('RPOP', KEYS[s + 2] .. ':' .. ns)
  if back then
    decrement(KEYS[s + 2], ns)
    redis.call('ZREM', KEYS[s + 5], back)
    redis.call('RPUSH', ready_of(KEYS[s + 3], KEYS[s + 6], back), back)
    notify(KEYS[s + 4], 1)
  end
end
"""

ENQUEUE = (
    _PRELUDE
    + """
-- KEYS: messages ready dead done cancelled notify
-- ARGV: dedup_seconds, then (run_id, message_json) per run; one outcome per run.
-- A batch is what concurrent enqueues of one client sent in the same moment.
local t = now()
local dedup = tonumber(ARGV[1])
local out = {}
local added = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local outcome = 'enqueued'
  if redis.call('HEXISTS', KEYS[1], id) == 1 then
    if redis.call('ZSCORE', KEYS[3], id) then outcome = 'dead'
    elseif redis.call('SISMEMBER', KEYS[5], id) == 1 then outcome = 'already-done'
    else outcome = 'already-queued' end
  else
    local done = redis.call('ZSCORE', KEYS[4], id)
    if done and tonumber(done) > t - dedup then
      outcome = 'already-done'
    else
      local message = cjson.decode(ARGV[i + 1])
      message['enqueued_at'] = t
      redis.call('HSET', KEYS[1], id, cjson.encode(message))
      local list = KEYS[2]
      if message['priority'] == 'High' then list = list .. ':high' end
      if message['priority'] == 'Low' then list = list .. ':low' end
      redis.call('LPUSH', list, id)
      added = added + 1
    end
  end
  table.insert(out, outcome)
end
if added > 0 then notify(KEYS[6], added) end
return out
"""
)

CLAIM = (
    _PRELUDE
    + """
-- KEYS: ready inflight leases messages cancelled done notify
--       owners shares parked delayed pace paced parked_runs key_owners key_held key_waiting
-- ARGV: count lease_seconds token_prefix fair_share ('' or JSON: d = default in-flight
--       limit per namespace, n = {namespace: limit}, r = default runs per minute,
--       rn = {namespace: runs per minute}; 0 = no limit)
-- With a fair share, a run of a namespace at its in-flight limit is parked (it comes
-- back when one of the namespace's runs leaves the in-flight set), and a run over its
-- namespace's rate is delayed until its reserved start (GCRA: a minute's worth may
-- start at once, then evenly). Neither is dropped; both are bounded per call.
-- Before that, a run whose concurrency key has all its places in flight is claimed to
-- wait (flag 1): its claimer shows it Waiting in status, then hands it to the key's
-- waiting list with WAIT_KEY, so no other worker can start it before status says so.
-- Returns (message, token, flag) per run.
local t = now()
local wanted = tonumber(ARGV[1])
local deadline = t + tonumber(ARGV[2])
local fair = nil
if ARGV[4] ~= '' then fair = cjson.decode(ARGV[4]) end
local out = {}
local taken = 0
local set_aside = 0
local ranked = redis.call('EXISTS', KEYS[1] .. ':high', KEYS[1] .. ':low') > 0
while taken < wanted and set_aside < 1000 do
  local id
  if ranked then id = pop_ready(KEYS[1]) else id = redis.call('RPOP', KEYS[1]) end
  if not id then break end
  if redis.call('SREM', KEYS[5], id) == 1 then
    redis.call('HDEL', KEYS[4], id)
    redis.call('SREM', KEYS[13], id)
    redis.call('ZADD', KEYS[6], t, id)  -- a cancelled run counts as done
  else
    local message = redis.call('HGET', KEYS[4], id)
    local ns = nil
    local key = nil
    if message and string.find(message, '"concurrency_key"', 1, true) then
      local decoded = cjson.decode(message)
      key = decoded['concurrency_key']
      if key and tonumber(redis.call('HGET', KEYS[16], key) or '0')
          >= tonumber(decoded['concurrency_limit'] or 1) then
        taken = taken + 1
        local token = ARGV[3] .. ':' .. taken
        redis.call('ZADD', KEYS[2], deadline, id)
        redis.call('HSET', KEYS[3], id, token)
        table.insert(out, message)
        table.insert(out, token)
        table.insert(out, 1)
        message = nil
      end
    end
    if message and fair then
      ns = cjson.decode(message)['namespace']
      local limit = tonumber(fair['n'][ns] or fair['d'])
      if limit > 0 and tonumber(redis.call('HGET', KEYS[9], ns) or '0') >= limit then
        redis.call('LPUSH', KEYS[10] .. ':' .. ns, id)
        redis.call('HINCRBY', KEYS[10], ns, 1)
        redis.call('ZADD', KEYS[14], t, id)
        set_aside = set_aside + 1
        message = nil
      else
        local reserved = redis.call('SREM', KEYS[13], id) == 1
        local rate = tonumber(fair['rn'][ns] or fair['r'])
        if rate > 0 and not reserved then
          local interval = 60 / rate
          local tat = math.max(tonumber(redis.call('HGET', KEYS[12], ns) or '0'), t)
          redis.call('HSET', KEYS[12], ns, string.format('%.6f', tat + interval))
          local start = tat - (60 - interval)
          if start > t + 0.001 then  -- not a rounding error's worth
            redis.call('ZADD', KEYS[11], start, id)
            redis.call('SADD', KEYS[13], id)
            set_aside = set_aside + 1
            message = nil
          end
        end
      end
    end
    if message then
      taken = taken + 1
      local token = ARGV[3] .. ':' .. taken
      redis.call('ZADD', KEYS[2], deadline, id)
      redis.call('HSET', KEYS[3], id, token)
      if ns then
        redis.call('HSET', KEYS[8], id, ns)
        redis.call('HINCRBY', KEYS[9], ns, 1)
      end
      if key then
        redis.call('HSET', KEYS[15], id, key)
        redis.call('HINCRBY', KEYS[16], key, 1)
      end
      table.insert(out, message)
      table.insert(out, token)
      table.insert(out, 0)
    end
  end
end
-- Nothing left to take: wake-up tokens left over from enqueues would only send
-- idle consumers round the loop (one empty claim each), so drop them.
if redis.call('EXISTS', KEYS[1], KEYS[1] .. ':high', KEYS[1] .. ':low') == 0 then
  redis.call('DEL', KEYS[7])
end
return out
"""
)

HEARTBEAT = (
    _PRELUDE
    + """
-- KEYS: inflight leases
-- ARGV: run_id token lease_seconds
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now() + tonumber(ARGV[3]), ARGV[1])
return 1
"""
)

ACK = (
    _PRELUDE
    + """
-- KEYS: inflight leases messages done,
--       then owners shares parked ready notify parked_runs messages
-- ARGV: dedup_seconds dedup_max, then (run_id, token) per run; 1 per run if its lease
-- was held. A batch is what the runs of one worker finished in the same moment.
-- The run IDs remembered for dedup are bounded by age and by count (the oldest go).
local t = now()
local out = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', KEYS[2], id) == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZADD', KEYS[4], t, id)
    free_slot(5, id)
    table.insert(out, 1)
  else
    table.insert(out, 0)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', t - tonumber(ARGV[1]))
local excess = redis.call('ZCARD', KEYS[4]) - tonumber(ARGV[2])
if excess > 0 then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, excess - 1) end
return out
"""
)

RETRY = (
    _PRELUDE
    + """
-- KEYS: inflight leases messages delayed,
--       then owners shares parked ready notify parked_runs messages
-- ARGV: run_id token delay_seconds attempt
local id = ARGV[1]
if redis.call('HGET', KEYS[2], id) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
free_slot(5, id)
local message = cjson.decode(redis.call('HGET', KEYS[3], id))
message['attempt'] = tonumber(ARGV[4])
redis.call('HSET', KEYS[3], id, cjson.encode(message))
redis.call('ZADD', KEYS[4], now() + tonumber(ARGV[3]), id)
return 1
"""
)

BURY = (
    _PRELUDE
    + """
-- KEYS: inflight leases dead dead_errors messages,
--       then owners shares parked ready notify parked_runs messages
-- ARGV: run_id token error dead_max dead_retention_seconds
-- The dead-letter queue keeps at most dead_max runs, none older than the retention:
-- the oldest go (their message and error with them), a bounded number per call.
local id = ARGV[1]
if redis.call('HGET', KEYS[2], id) ~= ARGV[2] then return 0 end
local t = now()
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
free_slot(6, id)
redis.call('ZADD', KEYS[3], t, id)
redis.call('HSET', KEYS[4], id, ARGV[3])
local cutoff = t - tonumber(ARGV[5])
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', cutoff, 'LIMIT', 0, 100)
local excess = redis.call('ZCARD', KEYS[3]) - #expired - tonumber(ARGV[4])
if excess > 0 then
  local last = #expired + math.min(excess, 100) - 1
  for _, old in ipairs(redis.call('ZRANGE', KEYS[3], #expired, last)) do
    table.insert(expired, old)
  end
end
for _, old in ipairs(expired) do
  redis.call('ZREM', KEYS[3], old)
  redis.call('HDEL', KEYS[4], old)
  redis.call('HDEL', KEYS[5], old)
end
return 1
"""
)

WAIT_KEY = (
    _PRELUDE
    + """
-- KEYS: inflight leases messages ready notify key_held key_waiting
-- ARGV: run_id token
-- A run claimed to wait for its concurrency key (CLAIM's flag 1) waits in the key's
-- list, in order; back at the claim end of ready if a place came free meanwhile.
local id = ARGV[1]
if redis.call('HGET', KEYS[2], id) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
local raw = redis.call('HGET', KEYS[3], id)
if not raw then return 1 end
local decoded = cjson.decode(raw)
decoded['waited'] = true
redis.call('HSET', KEYS[3], id, cjson.encode(decoded))
local key = decoded['concurrency_key']
if key and tonumber(redis.call('HGET', KEYS[6], key) or '0')
    >= tonumber(decoded['concurrency_limit'] or 1) then
  redis.call('LPUSH', KEYS[7] .. ':' .. key, id)
  redis.call('HINCRBY', KEYS[7], key, 1)
  return 1
end
redis.call('RPUSH', ready_of(KEYS[4], KEYS[3], id), id)
notify(KEYS[5], 1)
return 1
"""
)

RELEASE = (
    _PRELUDE
    + """
-- KEYS: inflight leases ready notify,
--       then owners shares parked ready notify parked_runs messages
-- ARGV: run_id token
local id = ARGV[1]
if redis.call('HGET', KEYS[2], id) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
free_slot(5, id)
redis.call('RPUSH', ready_of(KEYS[3], KEYS[11], id), id)
notify(KEYS[4], 1)
return 1
"""
)

REAP = (
    _PRELUDE
    + """
-- KEYS: inflight leases messages ready notify server,
--       then owners shares parked ready notify parked_runs messages
-- ARGV: limit grace_seconds
-- A restarted Redis reloads leases as they were when last written to disk: renewals
-- of the last moments may be lost with it, so deadlines look older than they are.
-- After a restart (a new run_id), nothing is reaped for grace_seconds: live workers
-- renew first. A queue seen for the first time has no leases to protect.
local t = now()
local running = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local known = redis.call('HGET', KEYS[6], 'run_id')
if known ~= running then
  redis.call('HSET', KEYS[6], 'run_id', running, 'since', known and t or 0)
end
if t - tonumber(redis.call('HGET', KEYS[6], 'since')) < tonumber(ARGV[2]) then return 0 end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  free_slot(7, id)
  local raw = redis.call('HGET', KEYS[3], id)
  if raw then
    local message = cjson.decode(raw)
    message['attempt'] = (message['attempt'] or 1) + 1
    message['redeliveries'] = (message['redeliveries'] or 0) + 1
    redis.call('HSET', KEYS[3], id, cjson.encode(message))
    redis.call('RPUSH', ready_of(KEYS[4], KEYS[3], id), id)
  end
end
if #ids > 0 then notify(KEYS[5], #ids) end
return #ids
"""
)

PROMOTE = (
    _PRELUDE
    + """
-- KEYS: delayed ready notify messages
-- ARGV: limit
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now(), 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('RPUSH', ready_of(KEYS[2], KEYS[4], id), id)
end
if #ids > 0 then notify(KEYS[3], #ids) end
return #ids
"""
)

REGISTER = (
    _PRELUDE
    + """
-- KEYS: consumers consumer_slots
-- ARGV: consumer slots ttl_seconds
-- Forgets consumers whose time ran out, notes this one alive with its slots (or gone,
-- with 0), and returns the slots of every consumer alive.
local t = now()
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t)
for _, consumer in ipairs(gone) do
  redis.call('ZREM', KEYS[1], consumer)
  redis.call('HDEL', KEYS[2], consumer)
end
if tonumber(ARGV[2]) > 0 then
  redis.call('ZADD', KEYS[1], t + tonumber(ARGV[3]), ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
end
local total = 0
for _, n in ipairs(redis.call('HVALS', KEYS[2])) do total = total + tonumber(n) end
return total
"""
)

REBALANCE = (
    _PRELUDE
    + """
-- KEYS: owners shares parked inflight ready notify parked_runs messages
--       key_owners key_held key_waiting
-- ARGV: fair_share (as CLAIM's; '' for none: every parked run returns) limit
-- Recounts each namespace's in-flight runs from the runs still in flight, then returns
-- parked runs of namespaces that have room now (a limit raised or lifted since they
-- were parked) to the claim end of ready; at most `limit` per call.
local fair = nil
if ARGV[1] ~= '' then fair = cjson.decode(ARGV[1]) end
-- owners: run ID -> what it counts for; counts: what -> runs in flight, rewritten from
-- the owners still in flight (the others are forgotten). Returns the counts.
local function recount(owners, counted)
  local counts = {}
  local owned = redis.call('HGETALL', owners)
  for i = 1, #owned, 2 do
    if redis.call('ZSCORE', KEYS[4], owned[i]) then
      counts[owned[i + 1]] = (counts[owned[i + 1]] or 0) + 1
    else
      redis.call('HDEL', owners, owned[i])
    end
  end
  redis.call('DEL', counted)
  for what, n in pairs(counts) do redis.call('HSET', counted, what, n) end
  return counts
end
local counts = recount(KEYS[1], KEYS[2])
local budget = tonumber(ARGV[2])
local moved = 0
local parked = redis.call('HGETALL', KEYS[3])
for i = 1, #parked, 2 do
  local ns = parked[i]
  local room = tonumber(parked[i + 1])
  if fair then
    local limit = tonumber(fair['n'][ns] or fair['d'])
    if limit > 0 then room = math.min(room, limit - (counts[ns] or 0)) end
  end
  room = math.min(room, budget - moved)
  local batches = {}
  for _ = 1, room do
    local id = redis.call('RPOP', KEYS[3] .. ':' .. ns)
    if not id then redis.call('HDEL', KEYS[3], ns) break end
    decrement(KEYS[3], ns)
    redis.call('ZREM', KEYS[7], id)
    local list = ready_of(KEYS[5], KEYS[8], id)
    batches[list] = batches[list] or {}
    table.insert(batches[list], 1, id)  -- the oldest goes last: it is claimed first
    moved = moved + 1
  end
  for list, batch in pairs(batches) do redis.call('RPUSH', list, unpack(batch)) end
end
-- The same for concurrency keys: places in flight recounted, and waiting runs of a
-- key with places free (its limit raised since they began to wait) returned.
local held = recount(KEYS[9], KEYS[10])
local waiting = redis.call('HGETALL', KEYS[11])
for i = 1, #waiting, 2 do
  local key, list = waiting[i], KEYS[11] .. ':' .. waiting[i]
  local oldest = redis.call('LINDEX', list, -1)
  local raw = oldest and redis.call('HGET', KEYS[8], oldest)
  local limit = raw and tonumber(cjson.decode(raw)['concurrency_limit'] or 1) or 1
  for _ = 1, math.min(limit - (held[key] or 0), budget - moved) do
    local id = redis.call('RPOP', list)
    if not id then redis.call('HDEL', KEYS[11], key) break end
    decrement(KEYS[11], key)
    redis.call('RPUSH', ready_of(KEYS[5], KEYS[8], id), id)
    moved = moved + 1
  end
end
if moved > 0 then notify(KEYS[6], moved) end
return moved
"""
)

CANCEL = (
    _PRELUDE
    + """
-- KEYS: messages inflight delayed dead cancelled done paced
-- ARGV: run_id
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], id) == 0 then return 0 end
if redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[4], id) then return 0 end
if redis.call('ZREM', KEYS[3], id) == 1 then
  redis.call('HDEL', KEYS[1], id)
  redis.call('SREM', KEYS[7], id)
  redis.call('ZADD', KEYS[6], now(), id)  -- a cancelled run counts as done
  return 1
end
return redis.call('SADD', KEYS[5], id)
"""
)

OLDEST_WAITING = """
-- KEYS: ready messages parked_runs cancelled
-- When the run that waits longest was enqueued (false: none waits): of the runs at
-- the claim end of each ready list and the run parked longest, the one enqueued first.
local oldest = false
local function consider(id)
  if not id or redis.call('SISMEMBER', KEYS[4], id) == 1 then return end
  local raw = redis.call('HGET', KEYS[2], id)
  if not raw then return end
  local t = tonumber(cjson.decode(raw)['enqueued_at'])
  if t and (not oldest or t < oldest) then oldest = t end
end
consider(redis.call('LINDEX', KEYS[1], -1))
consider(redis.call('LINDEX', KEYS[1] .. ':high', -1))
consider(redis.call('LINDEX', KEYS[1] .. ':low', -1))
consider(redis.call('ZRANGE', KEYS[3], 0, 0)[1])
if oldest then return tostring(oldest) end
return false
"""

LOCATE = """
-- KEYS: messages inflight delayed dead done cancelled
-- ARGV: run_id
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], id) == 1 then
  if redis.call('ZSCORE', KEYS[2], id) then return 'in-flight' end
  if redis.call('ZSCORE', KEYS[3], id) then return 'delayed' end
  if redis.call('ZSCORE', KEYS[4], id) then return 'dead' end
  if redis.call('SISMEMBER', KEYS[6], id) == 1 then return 'cancelled' end
  return 'ready'
end
if redis.call('ZSCORE', KEYS[5], id) then return 'done' end
return false
"""

REQUEUE_DEAD = (
    _PRELUDE
    + """
-- KEYS: dead dead_errors messages ready notify
-- ARGV: run_id ('' for a batch of the oldest) limit
local ids
if ARGV[1] ~= '' then ids = {ARGV[1]} else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('HDEL', KEYS[2], id)
    local message = cjson.decode(redis.call('HGET', KEYS[3], id))
    message['attempt'] = 1
    message['redeliveries'] = 0
    message['requeued'] = true
    redis.call('HSET', KEYS[3], id, cjson.encode(message))
    redis.call('LPUSH', ready_of(KEYS[4], KEYS[3], id), id)
    moved = moved + 1
  end
end
if moved > 0 then notify(KEYS[5], moved) end
return moved
"""
)

PURGE_DEAD = """
-- KEYS: dead dead_errors messages
-- ARGV: run_id ('' for a batch of the oldest) limit
local ids
if ARGV[1] ~= '' then ids = {ARGV[1]} else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
end
local removed = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    removed = removed + 1
  end
end
return removed
"""

NOTICE = (
    _PRELUDE
    + """
-- KEYS: notices notice_rate
-- ARGV: notice ("<run ID>/<event>") namespace per_minute keep_seconds
-- Whether to tell ``notice``: 'duplicate' if it was told (kept keep_seconds),
-- 'limited' if its namespace told per_minute this minute, else 'send' (noted told).
local t = now()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - tonumber(ARGV[4]))
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 'duplicate' end
local minute = math.floor(t / 60)
local count = 0
local held = redis.call('HGET', KEYS[2], ARGV[2])
if held then
  local m, c = string.match(held, '(%d+):(%d+)')
  if tonumber(m) == minute then count = tonumber(c) end
end
if count >= tonumber(ARGV[3]) then return 'limited' end
redis.call('HSET', KEYS[2], ARGV[2], minute .. ':' .. (count + 1))
redis.call('ZADD', KEYS[1], t, ARGV[1])
return 'send'
"""
)
