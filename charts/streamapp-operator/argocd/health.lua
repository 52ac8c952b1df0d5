-- Argo CD health of a StreamApp (streamapp.io/v1alpha1), read from what the StreamApp operator writes:
-- status.observedGeneration and the conditions Ready, Progressing, Degraded (and Restoring, for the message).
--   Progressing  being deleted; no status yet; a status older than the spec (observedGeneration below
--                metadata.generation); Progressing=True; Ready not True (pods starting or restoring state)
--   Suspended    annotation streamapp.io/paused: "true" (the operator leaves the app alone)
--   Degraded     Degraded=True, with its reason and message
--   Healthy      Ready=True
-- Argo CD runs it without Lua's string library, so it uses no string functions or methods.

local hs = {}

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Pending deletion"
  if obj.metadata.finalizers ~= nil and #obj.metadata.finalizers > 0 then
    hs.message = "Pending deletion; blocked by finalizers: " .. table.concat(obj.metadata.finalizers, ", ")
  end
  return hs
end

if obj.metadata.annotations ~= nil and obj.metadata.annotations["streamapp.io/paused"] == "true" then
  hs.status = "Suspended"
  hs.message = "Reconciliation is paused (annotation streamapp.io/paused)"
  return hs
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  if observed ~= nil then
    hs.message = hs.message .. " (status is of generation " .. observed .. ")"
  end
  return hs
end

local conditions = {}
for _, condition in ipairs(obj.status.conditions) do
  if condition.type ~= nil then
    conditions[condition.type] = condition
  end
end

local function describe(condition)
  if condition.reason ~= nil and condition.message ~= nil and condition.message ~= "" then
    return condition.reason .. ": " .. condition.message
  end
  return condition.reason or condition.message or ""
end

local degraded = conditions["Degraded"]
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(degraded)
  return hs
end

local ready = conditions["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end

hs.status = "Progressing"
local progressing = conditions["Progressing"]
if progressing ~= nil and progressing.status == "True" then
  hs.message = describe(progressing)
elseif ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the Ready condition"
end
local restoring = conditions["Restoring"]
if restoring ~= nil and restoring.status == "True" and restoring.message ~= nil then
  hs.message = hs.message .. "; " .. restoring.message
end
return hs
