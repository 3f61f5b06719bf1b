#!/usr/bin/env python3
"""Bytes that cross between nodes per all-reduce, measured on each node's network interface,
beside what the algorithm's description predicts. Run on the nodes of scripts/netns_cluster.sh
(each node's interface counts only that node's traffic), one job per algorithm:

    scripts/netns_cluster.sh run 2 2 -- env KOLO_ALLREDUCE_ALGO=ring \\
        /usr/bin/python3 bench/cross_node_bytes.py --sizes 1M,4M,16M --calls 10

Each size: 2 untimed calls, then the transmit counter of the node's interface (eth0, from
/proc/net/dev, which a process reads for its own network namespace) before and after --calls
all-reduces (float32, Sum) between two kolo barriers. Rank 0 prints per size: the bytes each
node sent per call (the mean over nodes, and the max), that per rank of the node, and the
prediction for the algorithm run (force one with KOLO_ALLREDUCE_ALGO: `auto` has no single
prediction), with S the message size, p ranks, n nodes of L:
  ring (flat, over ranks in rank order): each rank sends 2(p-1)/p S to the next, so a node sends
      that once per ring edge that leaves it. With ranks placed by node (mpirun's default, and
      torchrun's) one edge leaves each node; placed round-robin (`mpirun --map-by node`) every
      edge does: L times as much;
  hierarchical: each of a node's L ranks all-reduces S/L across the n nodes (ring among the
      nodes' k-th ranks), sending 2(n-1)/n S/L: 2(n-1)/n S per node, wherever ranks are placed.
Counters include Ethernet/IP/TCP headers and the transport's own messages (the negotiation),
so measured bytes run a few percent above the payload."""
import argparse
import os

import torch

import kolo.torch as hvd

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    text = text.strip().upper().rstrip("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def tx_bytes(interface):
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == interface:
                return int(rest.split()[8])
    raise SystemExit("no interface %s in this network namespace" % interface)


def predicted(algorithm, size_bytes, node_of_rank):
    """Bytes the busiest node sends per call (see above); node_of_rank: each rank's node."""
    p, n = len(node_of_rank), len(set(node_of_rank))
    if algorithm == "ring":
        leaving = [0] * p
        for r in range(p):
            if node_of_rank[r] != node_of_rank[(r + 1) % p]:
                leaving[node_of_rank[r]] += 1
        return max(leaving) * 2.0 * (p - 1) / p * size_bytes
    if algorithm == "hierarchical":
        return 2.0 * (n - 1) / n * size_bytes
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1M,4M,16M", help="message sizes, comma-separated")
    ap.add_argument("--calls", type=int, default=10, help="all-reduces counted per size")
    ap.add_argument("--interface", default="eth0")
    args = ap.parse_args()
    hvd.init()
    p, local, n = hvd.size(), hvd.local_size(), hvd.cross_size()
    algorithm = os.environ.get("KOLO_ALLREDUCE_ALGO", "auto")
    node_of_rank = hvd.allgather_object(hvd.cross_rank())
    if hvd.rank() == 0:
        print("# cross-node bytes per all-reduce: %d ranks, %d nodes of %d, algorithm %s, "
              "node of each rank %s" % (p, n, local, algorithm, node_of_rank))
        print("# %10s %14s %14s %14s %14s %8s" % ("size (B)", "node tx/call", "max node",
                                                  "per rank", "predicted", "max/pred."))
    for size_bytes in (parse_size(s) for s in args.sizes.split(",")):
        t = torch.ones(size_bytes // 4)
        for _ in range(2):
            hvd.allreduce(t, op=hvd.Sum, name="xnb.%d" % size_bytes)
        hvd.barrier()
        before = tx_bytes(args.interface)
        for _ in range(args.calls):
            hvd.allreduce(t, op=hvd.Sum, name="xnb.%d" % size_bytes)
        hvd.barrier()
        after = tx_bytes(args.interface)
        node_tx = (after - before) / args.calls if hvd.local_rank() == 0 else None
        per_node = [v for v in hvd.allgather_object(node_tx) if v is not None]
        if hvd.rank() == 0:
            mean = sum(per_node) / len(per_node)
            want = predicted(algorithm, size_bytes, node_of_rank)
            print("  %10d %14.0f %14.0f %14.0f %14.0f %8.3f"
                  % (size_bytes, mean, max(per_node), mean / local, want, max(per_node) / want))
    hvd.shutdown()


if __name__ == "__main__":
    main()
