#!/usr/bin/env python3
"""One rank of a job across the nodes of scripts/netns_cluster.sh: kolo must see the cluster's
nodes and pick and run the hierarchical all-reduce across them.

    netns_cluster.sh run 2 3+2 -- python3 check_nodes.py 3+2 TIMELINE

Checks, on every rank: kolo's size, local size, local rank and cross size are those of the
layout (ranks fill the nodes in order, RANKS per node as netns_cluster.sh takes them), and this
rank's host is the node the layout puts it on; all-reduces (Sum, Average; 8 elements and 1 Mi
elements) equal the sum computed here from every rank's known inputs, in float64; with
KOLO_TIMELINE=TIMELINE, rank 0 finds the large all-reduce run by the hierarchical algorithm
(kolo's `auto` choice on more than one node under mpirun; tests/multinode/CMakeLists.txt forces
it where `auto` may pick otherwise). Prints "PASSED rank R"; exits 1 naming what differs
otherwise."""
import socket
import sys

import torch

import kolo.torch as hvd

LARGE = 1 << 20


def fail(rank, message):
    print("FAILED rank %s on %s: %s" % (rank, socket.gethostname(), message), flush=True)
    sys.exit(1)


def data(rank, n):
    # Small integers: sums of them are exact in float32, so the reference is exact too.
    return (torch.arange(n, dtype=torch.float64) % 97) + rank


def main():
    counts = [int(c) for c in sys.argv[1].split("+")]
    timeline = sys.argv[2] if len(sys.argv) > 2 else None
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    firsts = [sum(counts[:i]) for i in range(len(counts))]
    node = max(i for i, first in enumerate(firsts) if first <= rank)
    local_rank = rank - firsts[node]
    expected = {"size": sum(counts), "local_size": counts[node], "local_rank": local_rank,
                "cross_size": sum(1 for c in counts if c > local_rank)}
    got = {"size": size, "local_size": hvd.local_size(), "local_rank": hvd.local_rank(),
           "cross_size": hvd.cross_size()}
    if got != expected:
        fail(rank, "kolo's layout %s, expected %s for nodes of %s ranks" % (got, expected, counts))
    host = socket.gethostname()
    if not host.endswith("-n%d" % node):
        fail(rank, "rank %d runs on %s, not on node %d" % (rank, host, node))

    for n in (8, LARGE):
        reference = sum(data(r, n) for r in range(size))
        for op, want in ((hvd.Sum, reference), (hvd.Average, reference / size)):
            out = hvd.allreduce(data(rank, n).float(), op=op, name="check.%d.%s" % (n, op))
            wrong = (out.double() - want).abs().max().item()
            if wrong > 1e-6 * max(1.0, want.abs().max().item()):
                fail(rank, "allreduce of %d elements, op %s: off by %g" % (n, op, wrong))
    hvd.shutdown()

    if timeline and rank == 0:
        with open(timeline) as f:
            text = f.read()
        if "ALLREDUCE (hierarchical)" not in text:
            runs = sorted(set(part.split(")")[0] for part in text.split("ALLREDUCE (")[1:]))
            fail(rank, "the all-reduce of %d elements did not run hierarchical across %d nodes "
                       "(the timeline has: %s)" % (LARGE, len(counts), runs or "nothing"))
    print("PASSED rank %d" % rank, flush=True)


if __name__ == "__main__":
    main()
