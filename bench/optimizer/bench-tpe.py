#!/usr/bin/python3
"""Optuna's TPE sampler on a bench-optimizer landscape, run as a practitioner would.

Usage: bench-tpe.py -- BENCH-OPTIMIZER --serve SPACE --seed S [options]

Starts the given `bench-optimizer --serve` command, reads the space it
describes, and lets Optuna's TPE sampler (Debian's python3-optuna) ask for
configurations: each one is sent to the evaluator as a JSON line and its
cost told back to the sampler. The sampler is the one a practitioner tuning
joint knobs picks: TPESampler(multivariate=True, group=True) — one joint
model of the knobs, not one per knob. Ordinal knobs (batch size, chunk
size) are suggested as an integer index into their sorted values, so TPE
sees their order; categorical ones (quantization, TP) as categories. It
gets what goodput's search gets: a configuration the memory pre-flight
refuses is answered as infeasible without a deployment, and a
configuration asked again is deployed and measured again with fresh noise
(and counts), so TPE may re-measure as the search re-probes. Configurations
that do not start, never meet the SLA, break a constraint or are refused by
the pre-flight come back with a value worse than any cost. The run ends
when the evaluator's deployments are spent, or after 4 asks per deployment
allowed; the evaluator's trace (regret after each deployment) is printed on
stdout for bench-optimizer to tabulate.

Exit status 77 when Optuna is not installed.
"""
import json
import subprocess
import sys
import warnings

try:
    import optuna
except ImportError:
    sys.stderr.write("bench-tpe.py: python3-optuna is not installed\n")
    sys.exit(77)


def main(argv):
    if "--" not in argv:
        sys.stderr.write(__doc__)
        return 2
    cmd = argv[argv.index("--") + 1:]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    hello = json.loads(proc.stdout.readline())
    knobs = hello["knobs"]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    sampler = optuna.samplers.TPESampler(seed=int(hello["seed"]), multivariate=True, group=True)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    for _ in range(4 * max(1, int(hello["max_deployments"]))):
        trial = study.ask()
        config = {}
        for k in knobs:
            values = k["values"]
            if k["categorical"] or len(values) < 2:
                config[k["name"]] = trial.suggest_categorical(k["name"], values)
            else:
                config[k["name"]] = values[trial.suggest_int(k["name"], 0, len(values) - 1)]
        proc.stdin.write(json.dumps({"config": config}) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        if answer.get("done"):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            break
        study.tell(trial, answer["value"])
    proc.stdin.close()
    trace = proc.stdout.read()
    if proc.wait() != 0:
        return 1
    sys.stdout.write(trace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
