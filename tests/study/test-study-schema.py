#!/usr/bin/env python3
"""The study spec's JSON Schema (`goodput tune --help-spec --json-schema`),
checked by an independent validator (python3-jsonschema, draft 2020-12):
the schema is itself valid, every shipped example study passes it, and specs
with the usual mistakes are refused both by the schema and by goodput, whose
message names the key.

Usage: test-study-schema.py GOODPUT SOURCE_ROOT
"""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(77)

GOODPUT, ROOT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def schema():
    p = subprocess.run([GOODPUT, "tune", "--help-spec", "--json-schema"], capture_output=True, text=True)
    if p.returncode != 0:
        fail("--json-schema exited %d: %s" % (p.returncode, p.stderr))
    s = json.loads(p.stdout)
    jsonschema.Draft202012Validator.check_schema(s)
    if s.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
        fail("no draft 2020-12 $schema: %r" % s.get("$schema"))
    # what the table says, visible to editors
    if s["additionalProperties"] is not False or s["properties"]["workload"]["additionalProperties"] is not False:
        fail("unknown keys are not refused by the schema")
    for key in ("name", "engine", "model", "gpu", "search_space", "workload"):
        if key not in s["required"]:
            fail("%s is not required" % key)
    gpu_count = s["properties"]["gpu"]["properties"]["count"]
    if (gpu_count["type"], gpu_count["minimum"], gpu_count["maximum"]) != ("integer", 1, 64):
        fail("gpu.count: %r" % gpu_count)
    if "GPUs on the host" not in gpu_count["description"] or "default: 1" not in gpu_count["description"]:
        fail("gpu.count has no description with its default: %r" % gpu_count)
    if s["properties"]["scenario"]["enum"] != ["online", "offline"]:
        fail("scenario: %r" % s["properties"]["scenario"])
    return jsonschema.Draft202012Validator(s)


def goodput_refuses(spec, want, tmp):
    path = os.path.join(tmp, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = subprocess.run([GOODPUT, "tune", "--db", os.path.join(tmp, "g.db"), path], capture_output=True, text=True,
                       cwd=tmp, timeout=60)
    if p.returncode != 2:
        fail("goodput exited %d on a spec with %s:\n%s" % (p.returncode, want, p.stderr))
    if want not in p.stderr:
        fail("goodput's message lacks %r:\n%s" % (want, p.stderr))


def mutate(spec, path, value):
    """Sets (or with value None deletes) the key at a dotted path."""
    s = copy.deepcopy(spec)
    *parents, leaf = path.split(".")
    o = s
    for k in parents:
        o = o.setdefault(k, {})
    if value is None:
        del o[leaf]
    else:
        o[leaf] = value
    return s


def main():
    v = schema()
    examples = sorted(glob.glob(os.path.join(ROOT, "configs", "studies", "*.json")))
    if not examples:
        fail("no example studies in configs/studies")
    for path in examples:
        with open(path) as f:
            spec = json.load(f)
        errors = [e.message for e in v.iter_errors(spec)]
        if errors:
            fail("%s does not pass the schema: %s" % (path, errors))
    print("%d example studies pass the schema" % len(examples))

    with open(os.path.join(ROOT, "configs", "studies", "sim-demo.json")) as f:
        base = json.load(f)
    mistakes = [
        ("budgett", 3, "budgett: unknown key"),
        ("workload.input_length", 3, "workload.input_length: unknown key"),
        ("sla.ttft", 3, "sla.ttft: unknown key"),
        ("gpu.count", 0, "gpu.count: expected an integer in [1, 64]"),
        ("gpu.count", "4", "gpu.count: expected an integer"),
        ("gpu.price_per_gpu_hour", None, "gpu.price_per_gpu_hour: missing"),
        ("scenario", "batch", "scenario: expected one of"),
        ("budget.max_wall_time", "8 hours", "budget.max_wall_time: expected seconds"),
        ("workload.ignore_eos", 1, "workload.ignore_eos: expected true or false"),
        ("workload.request_rate", "fast", "workload.request_rate"),
        ("quantizations", ["none", "none"], "quantizations[1]: \"none\" is listed twice"),
        ("quantizations", ["none", "fp4"], "quantizations[1]"),
        ("quality_check", [], "quality_check"),
        ("name", "my study", "name: \"my study\""),
        ("window", "22-06", "window: expected \"HH:MM-HH:MM\""),
        ("label", None, None),  # a valid change: both accept (checked by the schema only)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for path, value, want in mistakes:
            spec = mutate(base, path, value)
            schema_errors = list(v.iter_errors(spec))
            if want is None:
                if schema_errors:
                    fail("%s = %r: refused by the schema: %s" % (path, value, schema_errors[0].message))
                continue
            if not schema_errors:
                fail("%s = %r: accepted by the schema" % (path, value))
            goodput_refuses(spec, want, tmp)
    print("%d mistakes refused by the schema and by goodput" % (len(mistakes) - 1))


main()
