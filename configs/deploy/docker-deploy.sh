#!/bin/sh
# docker-deploy.sh — deploy one goodput trial as a Docker container.
#
# Study spec:
#   "deploy": {
#     "method": "command",
#     "deploy_command": ["/etc/goodput/deploy/docker-deploy.sh", "vllm/vllm-openai:latest"],
#     "teardown_command": ["/etc/goodput/deploy/docker-teardown.sh"],
#     "startup_timeout": "20m"
#   }
#
# goodput runs this without a shell string: the first argument is the image,
# the rest ("$@" after the shift) is the engine command line goodput rendered
# from the profile (e.g. "vllm serve MODEL --port 8123 --max-num-seqs 64").
# Knob values also arrive as environment variables (GOODPUT_KNOB_MAX_NUM_SEQS,
# GOODPUT_KNOB_TENSOR_PARALLEL, ...), with GOODPUT_PORT, GOODPUT_TRIAL_ID and
# GOODPUT_STUDY. Always quote them: they are data, never code.
#
# The script must print "GOODPUT_BASE_URL=http://HOST:PORT" on a line of its
# output; goodput then polls the profile's health path there. Exit non-zero
# on failure: goodput records the output and runs the teardown command.
set -eu

image=$1
shift
name="goodput-${GOODPUT_STUDY}-${GOODPUT_TRIAL_ID}"

# One GPU per tensor-parallel rank: "device=0,1" for TP 2.
tp=${GOODPUT_KNOB_TENSOR_PARALLEL:-1}
gpus=$(seq -s, 0 $((tp - 1)))

# The vLLM image's entrypoint is the API server: drop the rendered "vllm serve"
# prefix if you use it; images whose entrypoint is a shell take "$@" as is.
docker run --detach --name "$name" \
	--gpus "\"device=$gpus\"" --ipc=host \
	--publish "127.0.0.1:${GOODPUT_PORT}:${GOODPUT_PORT}" \
	--volume "$HOME/.cache/huggingface:/root/.cache/huggingface" \
	--label "goodput.study=${GOODPUT_STUDY}" --label "goodput.trial=${GOODPUT_TRIAL_ID}" \
	"$image" "$@"

echo "GOODPUT_BASE_URL=http://127.0.0.1:${GOODPUT_PORT}"
