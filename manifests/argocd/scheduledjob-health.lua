-- Argo CD health check for tickwork.dev/ScheduledJob (docs/operations.md, "Argo CD").
-- Healthy: scheduled, or a one-shot whose run is over (a recurring job past its
-- notAfter) and did not fail.
-- Progressing: the operator has not yet acted on the latest spec.
-- Degraded: an invalid spec, a pause after failed runs, a last run that failed, a missed
-- one-shot run.
-- Suspended: spec.suspend is true (and the last run did not fail).
local hs = {}

local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
if obj.status == nil or obj.status.observedGeneration == nil
    or obj.status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Tickwork operator to act on the latest spec"
  return hs
end

local ready = condition("Ready")
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Tickwork operator to report readiness"
  return hs
end
if ready.status == "False" then
  hs.status = "Degraded"
  hs.message = ready.reason .. ": " .. (ready.message or "")
  return hs
end
if obj.status.phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true: no run is published"
  return hs
end

hs.status = "Healthy"
if obj.status.phase == "Completed" then
  hs.message = "The one-shot run is over"
  if obj.spec ~= nil and obj.spec.runAt == nil then
    hs.message = "No run is left before notAfter"
  end
  if obj.status.lastRun ~= nil and obj.status.lastRun.outcome ~= nil then
    hs.message = hs.message .. ": " .. obj.status.lastRun.outcome
  end
elseif obj.status.nextRunAt ~= nil then
  hs.message = "Next run at " .. obj.status.nextRunAt
else
  hs.message = ready.message or ""
end
return hs
