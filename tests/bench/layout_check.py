#!/usr/bin/python3
"""`kolo-bench --model NAME --layout` as scripts read it (bench/gradient_set.py).

For every model: one JSON object per line with "name" and "shape", as many tensors and
parameters as the architecture's published counts (torchvision's resnet50 and resnet101,
Hugging Face's bert-base-uncased BertModel; tiny-1000's 1000 tensors of 256), unique names,
positive extents, and the same output when the launcher's rank variables say rank 0. Then the
refusals: --layout without --model and with an unknown one exit with status 2 and name the
known models; with a rank variable other than 0 nothing is printed (under mpirun only rank 0
prints, like --help).
Exit status 0 when everything holds; the first failure is printed.
"""
import argparse
import json
import math
import os
import subprocess
import sys

# Published parameter counts, independent of kolo's bench/models.cc.
EXPECTED = {
    "resnet50": (161, 25557032),
    "resnet101": (314, 44549160),
    "bert-base": (199, 109482240),
    "tiny-1000": (1000, 256000),  # 1000 tensors of [256]
}


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def run(bench, args, env_extra=None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")}
    env.update(env_extra or {})
    return subprocess.run([bench] + args, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True, help="the kolo-bench executable")
    bench = parser.parse_args().bench
    for model, (tensors, params) in EXPECTED.items():
        done = run(bench, ["--model", model, "--layout"])
        if done.returncode != 0:
            fail("%s: exit status %d: %s" % (model, done.returncode, done.stderr))
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        if any(sorted(r) != ["name", "shape"] for r in rows):
            fail("%s: a line without exactly name and shape" % model)
        total = 0
        for r in rows:
            if not r["shape"] or any(not isinstance(e, int) or e <= 0 for e in r["shape"]):
                fail("%s: tensor %s has shape %r" % (model, r["name"], r["shape"]))
            total += math.prod(r["shape"])
        if len(rows) != tensors or total != params:
            fail("%s: %d tensors, %d parameters; expected %d and %d" % (
                model, len(rows), total, tensors, params))
        if len({r["name"] for r in rows}) != len(rows):
            fail("%s: repeated names" % model)
        as_rank0 = run(bench, ["--model", model, "--layout"], {"OMPI_COMM_WORLD_RANK": "0"})
        if as_rank0.stdout != done.stdout:
            fail("%s: rank 0 under a launcher prints another layout" % model)
    as_rank1 = run(bench, ["--model", "resnet50", "--layout"], {"OMPI_COMM_WORLD_RANK": "1"})
    if as_rank1.returncode != 0 or as_rank1.stdout or as_rank1.stderr:
        fail("rank 1 under a launcher: exit %d, printed %r %r" % (
            as_rank1.returncode, as_rank1.stdout[:80], as_rank1.stderr[:80]))
    for args, needle in ((["--layout"], "takes --model NAME, one of resnet50"),
                         (["--model", "resnet5O", "--layout"], "(got 'resnet5O')")):
        done = run(bench, args)
        if done.returncode != 2 or needle not in done.stderr or done.stdout:
            fail("%s: exit %d, stderr %r" % (" ".join(args), done.returncode, done.stderr))
    print("PASSED: layouts of %s" % ", ".join(EXPECTED))


if __name__ == "__main__":
    main()
