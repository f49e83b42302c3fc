#!/bin/sh
# kubectl-deploy.sh — deploy one goodput trial by patching an existing
# Kubernetes Deployment (one replica of an inference server behind a Service)
# and waiting for its rollout.
#
# Study spec:
#   "deploy": {
#     "method": "command",
#     "deploy_command": ["/etc/goodput/deploy/kubectl-deploy.sh", "llm-namespace", "vllm",
#                        "http://vllm.llm-namespace.svc.cluster.local:8000"],
#     "teardown_command": ["/etc/goodput/deploy/kubectl-teardown.sh", "llm-namespace", "vllm"],
#     "startup_timeout": "30m"
#   }
#
# The engine flags are taken from the rendered command line goodput appends
# ("$@" after the three arguments); its --host/--port are replaced by the
# container's own. Values come from goodput as arguments and environment
# variables; they go into the patch as JSON strings built by jq, never
# pasted into a shell command.
set -eu

ns=$1
deploy=$2
url=$3
shift 3

# The server's arguments without the program name ("vllm serve MODEL"
# stays as the container's command; only the flags after it change).
args=$(jq --compact-output --null-input '$ARGS.positional' --args "$@")

# GPUs per pod = tensor parallel size.
gpus=${GOODPUT_KNOB_TENSOR_PARALLEL:-1}

patch=$(jq --compact-output --null-input \
	--argjson args "$args" --arg gpus "$gpus" \
	--arg trial "$GOODPUT_TRIAL_ID" --arg study "$GOODPUT_STUDY" '
	{spec: {replicas: 1, template: {
		metadata: {annotations: {"goodput/study": $study, "goodput/trial": $trial}},
		spec: {containers: [{name: "server",
			command: $args[0:1], args: $args[1:],
			resources: {limits: {"nvidia.com/gpu": $gpus}}}]}}}}')

kubectl --namespace "$ns" patch deployment "$deploy" --type strategic --patch "$patch"
kubectl --namespace "$ns" rollout status deployment "$deploy" --timeout 25m

# The Service in front of the Deployment: the probe measures the server
# through it (from this host), so the URL is the cluster's, not a port here.
echo "GOODPUT_BASE_URL=$url"
