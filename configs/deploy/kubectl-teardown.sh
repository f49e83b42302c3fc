#!/bin/sh
# kubectl-teardown.sh — scale the trial's Deployment to zero so that the
# next trial starts from a clean pod (and the GPUs are free meanwhile).
set -u
ns=$1
deploy=$2
kubectl --namespace "$ns" scale deployment "$deploy" --replicas 0 || true
kubectl --namespace "$ns" wait --for=delete pod --selector "app=$deploy" --timeout 10m || true
exit 0
