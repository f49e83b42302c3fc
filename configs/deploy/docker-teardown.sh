#!/bin/sh
# docker-teardown.sh — remove the container docker-deploy.sh started for a
# trial. Runs after every trial, also after a failed deploy (then the
# container may not exist: that is fine). Keeps the container's log in the
# trial's log first, for the record.
set -u
name="goodput-${GOODPUT_STUDY}-${GOODPUT_TRIAL_ID}"
docker logs --tail 50 "$name" 2>&1 || true
docker stop --time 30 "$name" >/dev/null 2>&1 || true
docker rm --force "$name" >/dev/null 2>&1 || true
# Wait until the published port is free again, so the next trial can use it.
i=0
while [ $i -lt 60 ] && docker ps --quiet --filter "name=^${name}\$" | grep -q .; do
	sleep 1
	i=$((i + 1))
done
exit 0
