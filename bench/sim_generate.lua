-- wrk script for bench/sim.sh: POST /generate with a different prompt per
-- request (as a pipeline sends them), max_new_tokens high enough that the
-- simulated output length distribution decides.
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
  counter = counter + 1
  local body = string.format(
    '{"text":"<|im_start|>user\\nprompt %d<|im_end|>\\n<|im_start|>assistant\\n","sampling_params":{"max_new_tokens":16384}}',
    counter % 5000)
  return wrk.format(nil, "/generate", nil, body)
end
