#!/bin/sh
# kubectl-health.sh — optional "health_command" for clusters where this host
# cannot reach the Service directly: asks through the API server instead.
# Exit status 0 means ready. Arguments: NAMESPACE SERVICE PORT.
#   "health_command": ["/etc/goodput/deploy/kubectl-health.sh", "llm-namespace", "vllm", "8000"]
set -u
kubectl --namespace "$1" get --raw "/api/v1/namespaces/$1/services/$2:$3/proxy/health" >/dev/null 2>&1
