#!/usr/bin/python3
"""Optuna's TPE sampler on a bench-optimizer landscape.

Usage: bench-tpe.py -- BENCH-OPTIMIZER --serve SPACE --seed S [options]

Starts the given `bench-optimizer --serve` command, reads the space it
describes, and lets Optuna's TPE sampler (Debian's python3-optuna) ask for
configurations: each one is sent to the evaluator as a JSON line and its
cost told back to the sampler. Ordinal knobs (batch size, chunk size) are
suggested as an integer index into their sorted values, so TPE sees their
order; categorical ones (quantization, TP) as categories. Configurations
that do not start, never meet the SLA or break a constraint come back with
a value worse than any cost. The run ends when every configuration has been
deployed (or as many as the evaluator allows), after 30 asks in a row
that brought nothing new (TPE has converged), or after 4 asks per
deployment allowed; the evaluator's trace (regret
after each deployment) is printed on stdout for bench-optimizer to tabulate.

Exit status 77 when Optuna is not installed.
"""
import json
import subprocess
import sys

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
    sampler = optuna.samplers.TPESampler(seed=int(hello["seed"]))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    idle = 0
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
        # converged: it keeps asking for what it has seen
        idle = 0 if answer["deployed"] else idle + 1
        if idle >= 30:
            break
    proc.stdin.close()
    trace = proc.stdout.read()
    if proc.wait() != 0:
        return 1
    sys.stdout.write(trace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
