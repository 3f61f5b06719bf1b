#!/usr/bin/env bash
# Several nodes on this one machine: each "node" a network namespace with a host name of its own
# (a UTS namespace), its one interface (eth0, a veth pair) plugged into a bridge that lives in a
# namespace of its own and is connected to nothing else (no default route, no NAT, nothing in
# the machine's own namespace: traffic never leaves the cluster's namespaces), and each link
# shaped with tc (netem: a rate and a one-way delay; tbf, the rate alone, where the kernel has no
# netem), so that bytes between nodes are the scarce
# resource they are on a cluster while ranks inside a node share memory as usual. kolo and
# Open MPI tell nodes apart by host name, which is why each node has its own.
#
#   scripts/netns_cluster.sh up NODES [options]          make the cluster and leave it up
#   scripts/netns_cluster.sh down [--name NAME]          remove everything `up` made
#   scripts/netns_cluster.sh run NODES RANKS [options] -- CMD [ARGS...]
#       make a cluster, run CMD on RANKS ranks per node, remove the cluster (also on failure or
#       Ctrl-C); exits with CMD's status. RANKS: one count for every node ("2"), or one per node
#       joined by "+" ("3+2"). By default CMD runs under mpirun started in node 0 (hostfile of
#       the nodes, Open MPI's tcp btl on eth0 between nodes, its shared memory inside one, an
#       rsh agent that enters the target node's namespaces); with --env, as torchrun starts a
#       job: each rank started in its node with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
#       GROUP_RANK, MASTER_ADDR (node 0's address) and MASTER_PORT, and no MPI launcher. Exits 77
#       (nothing run) where namespaces cannot be made here, saying why.
#   scripts/netns_cluster.sh exec NODE CMD [ARGS...]     run a command inside a node (its
#       network and UTS namespaces); mpirun's rsh agent, and a way in for a person
#   scripts/netns_cluster.sh check                      exit 0 if namespaces can be made here,
#       77 (with the reason on stderr) if not
#
# Options: --name NAME (default "kolo"; `run` without it picks a fresh one, so runs may overlap),
#   --rate RATE (tc's units, default 10gbit), --delay DELAY (one way, node to node, default
#   20us), --no-shape (links at veth speed), --env (run: no MPI), --timeout SECONDS (run: kill CMD
#   after this long, exit 124), --mpirun-arg ARG (run: one more mpirun argument; repeatable).
#
# Nodes are NAME-n0 ... NAME-n<N-1> (namespace and host name alike), at 10.213.0.1 ... on eth0;
# the bridge is in NAME-sw. Shaping: each node's eth0 sends at RATE after DELAY, and the bridge's
# port to each node sends at RATE, so a node moves at most RATE in each direction. State (host
# name namespaces, the hostfile, node list) is kept under /run/kolo-netns/NAME. Root only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
self="${here}/$(basename "${BASH_SOURCE[0]}")"
state_root=/run/kolo-netns
subnet=10.213.0

name="" rate=10gbit delay=20us shape=1 env_start=0 timeout_s=0
mpirun_extra=()

die() { echo "netns_cluster: $*" >&2; exit 1; }

node_ns() { echo "${name}-n$1"; }
node_addr() { echo "${subnet}.$(($1 + 1))"; }

# Why namespaces cannot be made here, or nothing.
cannot() {
  [[ ${EUID} -eq 0 ]] || { echo "not root"; return; }
  local tool
  for tool in ip tc nsenter unshare; do
    command -v "${tool}" >/dev/null || { echo "${tool} is missing (Debian: iproute2, util-linux)"; return; }
  done
  local probe="kolo-probe-$$"
  if ! ip netns add "${probe}" 2>/dev/null; then
    echo "ip netns add fails (no CAP_SYS_ADMIN, or a container without network namespaces)"
    return
  fi
  local why=""
  if ! ip link add name p0 netns "${probe}" type veth peer name p1 netns "${probe}" 2>/dev/null; then
    why="veth pairs cannot be made (no veth module)"
  elif ! ip netns exec "${probe}" tc qdisc add dev p0 root tbf rate 10gbit burst 1mb \
      latency 5ms 2>/dev/null; then
    why="tc's tbf qdisc is unavailable (no sch_tbf module)"
  elif ! ip netns exec "${probe}" unshare --uts true 2>/dev/null; then
    why="UTS namespaces cannot be made"
  fi
  ip netns del "${probe}" 2>/dev/null || true
  echo "${why}"
}

# Counts of ranks per node from "2" (every node) or "3+2" (node by node).
ranks_per_node() {
  local nodes=$1 spec=$2 i
  if [[ ${spec} == *+* ]]; then
    IFS=+ read -r -a counts <<<"${spec}"
    ((${#counts[@]} == nodes)) || die "ranks ${spec}: ${#counts[@]} counts for ${nodes} nodes"
  else
    counts=()
    for ((i = 0; i < nodes; i++)); do counts+=("${spec}"); done
  fi
  for i in "${counts[@]}"; do
    [[ ${i} =~ ^[1-9][0-9]*$ ]] || die "ranks per node must be positive integers: ${spec}"
  done
}

# The rate (and, where the kernel has netem, the delay) on one side of a link. netem's own
# queue (1000 packets) would drop the bursts of 64 KiB segments a veth sends at this rate.
# Without netem (sch_netem is a module some kernels lack) tbf limits the rate and the delay is
# the veth's own, a few microseconds: said once, on stderr.
shape_link() {
  local ns=$1 dev=$2 wait=$3
  if ip netns exec "${ns}" tc qdisc add dev "${dev}" root netem delay "${wait}" rate "${rate}" \
      limit 100000 2>/dev/null; then
    return
  fi
  if [[ ${wait} != 0us && ! -e ${state_root}/${name}/no-netem ]]; then
    echo "netns_cluster: no tc netem in this kernel: links at ${rate} (tbf), without the" \
      "${wait} delay" >&2
    touch "${state_root}/${name}/no-netem"
  fi
  ip netns exec "${ns}" tc qdisc add dev "${dev}" root tbf rate "${rate}" \
    burst "$(burst_bytes)" latency 5ms
}

# tbf's bucket: what the link sends in 1 ms at RATE (at least 64 KiB, one veth segment). A larger
# bucket lets a whole message of a few MiB through at the veth's speed, so a ping-pong would
# measure the bucket, not the rate.
burst_bytes() {
  local number unit bits
  [[ ${rate} =~ ^([0-9]+)([kmg]?)bit$ ]] || { echo 1mb; return; }
  number=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case "${unit}" in
    k) bits=$((number * 1000)) ;;
    m) bits=$((number * 1000000)) ;;
    g) bits=$((number * 1000000000)) ;;
    *) bits=${number} ;;
  esac
  local bytes=$((bits / 8 / 1000))
  echo $((bytes > 65536 ? bytes : 65536))
}

up() {
  local nodes=$1 i ns dir
  if [[ ! ${nodes} =~ ^[1-9][0-9]*$ ]] || ((nodes > 200)); then
    die "nodes: 1 to 200, not ${nodes}"
  fi
  dir="${state_root}/${name}"
  [[ ! -e ${dir} ]] || die "a cluster named ${name} is up already (${self} down --name ${name})"
  mkdir -p "${dir}"
  echo "${nodes}" >"${dir}/nodes"
  ip netns add "${name}-sw"
  ip -n "${name}-sw" link set lo up
  ip -n "${name}-sw" link add br0 type bridge
  ip -n "${name}-sw" link set br0 up
  for ((i = 0; i < nodes; i++)); do
    ns="$(node_ns "${i}")"
    ip netns add "${ns}"
    touch "${dir}/uts-${i}"
    unshare --uts="${dir}/uts-${i}" hostname "${ns}"
    ip link add name eth0 netns "${ns}" type veth peer name "p${i}" netns "${name}-sw"
    ip -n "${name}-sw" link set "p${i}" master br0 up
    ip -n "${ns}" addr add "$(node_addr "${i}")/24" dev eth0
    ip -n "${ns}" link set lo up
    ip -n "${ns}" link set eth0 up
    if ((shape)); then
      shape_link "${ns}" eth0 "${delay}"
      shape_link "${name}-sw" "p${i}" 0us
    fi
    echo "${ns} slots=64" >>"${dir}/hostfile"
  done
}

down() {
  local dir="${state_root}/${name}" left=0 ns
  # Every namespace of this name, also those of a half-made cluster.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    if [[ ${ns} == "${name}-sw" || ${ns} =~ ^${name}-n[0-9]+$ ]]; then
      # A process still inside keeps the namespace alive after its name is gone.
      ip netns pids "${ns}" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "${ns}" || left=1
    fi
  done
  if [[ -d ${dir} ]]; then
    # The host-name namespaces: each kept by a bind mount on its file.
    umount "${dir}"/uts-* 2>/dev/null || true
    rm -rf "${dir}" || left=1
    rmdir "${state_root}" 2>/dev/null || true
  fi
  return "${left}"
}

# Runs a command inside node NODE (a node name or its number).
exec_in() {
  local node=$1
  shift
  [[ ${node} =~ ^[0-9]+$ ]] && node="$(node_ns "${node}")"
  local i=${node##*-n}
  [[ ${node} == "${name}-n${i}" && -e ${state_root}/${name}/uts-${i} ]] ||
    die "no node ${node} in cluster ${name}"
  exec nsenter --net="/run/netns/${node}" --uts="${state_root}/${name}/uts-${i}" "$@"
}

run_cmd() {
  local nodes=$1 spec=$2
  shift 2
  ranks_per_node "${nodes}" "${spec}"
  local why
  why="$(cannot)"
  if [[ -n ${why} ]]; then
    echo "netns_cluster: skipped, namespaces cannot be made here: ${why}" >&2
    exit 77
  fi
  local total=0 c
  for c in "${counts[@]}"; do total=$((total + c)); done
  trap 'down || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  up "${nodes}"
  local dir="${state_root}/${name}" i
  : >"${dir}/hostfile"
  for ((i = 0; i < nodes; i++)); do
    echo "$(node_ns "${i}") slots=${counts[i]}" >>"${dir}/hostfile"
  done
  local limit=()
  ((timeout_s > 0)) && limit=(timeout --kill-after=10 "${timeout_s}")
  local status=0
  if ((env_start)); then
    run_env "${nodes}" "${total}" "${limit[@]}" "$@" || status=$?
  else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # The agent is this script: `exec NODE orted ...` (Open MPI passes the remote command as
    # words for a shell, as to ssh). Between nodes Open MPI's tcp btl on eth0 only (not lo:
    # every namespace has a 127.0.0.1 of its own); inside a node its shared memory.
    # shellcheck disable=SC2054 # "tcp,vader,self" is one argument
    local mpirun=(mpirun --hostfile "${dir}/hostfile" -np "${total}" --map-by slot
      --bind-to none --oversubscribe --mca mpi_yield_when_idle 1
      --mca plm_rsh_agent "${self} --name ${name} agent"
      --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0
      "${mpirun_extra[@]}")
    # In the background, so that a signal's trap runs at once (bash runs traps only between
    # commands): `down` then kills whatever runs in the cluster's namespaces, mpirun included.
    exec_in 0 "${limit[@]}" "${mpirun[@]}" "$@" &
    wait $! || status=$?
  fi
  return "${status}"
}

# The MPI-free start: each rank in its node, with torchrun's variables.
run_env() {
  local nodes=$1 total=$2
  shift 2
  local port=$((20000 + RANDOM % 20000)) rank=0 i j pids=() status=0
  for ((i = 0; i < nodes; i++)); do
    for ((j = 0; j < counts[i]; j++)); do
      (
        export RANK=${rank} WORLD_SIZE=${total} LOCAL_RANK=${j} LOCAL_WORLD_SIZE=${counts[i]}
        export GROUP_RANK=${i} MASTER_ADDR=${subnet}.1 MASTER_PORT=${port}
        exec_in "${i}" "$@"
      ) &
      pids+=($!)
      rank=$((rank + 1))
    done
  done
  for i in "${pids[@]}"; do
    wait "${i}" || { c=$?; ((status == 0)) && status=${c}; }
  done
  return "${status}"
}

# ---- arguments ------------------------------------------------------------------------------
args=()
while (($#)); do
  case "$1" in
    --name) name=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --no-shape) shape=0; shift ;;
    --env) env_start=1; shift ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mpirun-arg) mpirun_extra+=("$2"); shift 2 ;;
    --) shift; break ;;
    agent | exec) args+=("$1"); shift; break ;;  # the rest is the node and its command
    *) args+=("$1"); shift ;;
  esac
done
cmd=(); (($#)) && cmd=("$@")
action="${args[0]:-}"
[[ ${name} =~ ^[a-z][a-z0-9]{0,9}$ || -z ${name} ]] ||
  die "--name: a lower-case letter, then up to 9 letters or digits (namespace names stay short)"

case "${action}" in
  check)
    why="$(cannot)"
    [[ -z ${why} ]] || { echo "netns_cluster: ${why}" >&2; exit 77; }
    ;;
  up)
    ((${#args[@]} == 2)) || die "usage: up NODES [options]"
    name=${name:-kolo}
    why="$(cannot)"
    [[ -z ${why} ]] || die "cannot make namespaces here: ${why}"
    [[ ! -e ${state_root}/${name} ]] ||
      die "a cluster named ${name} is up already (${self} down --name ${name})"
    # A half-made cluster is removed (set -e ends `up` at its first failure).
    trap 'down || true' EXIT
    up "${args[1]}"
    trap - EXIT
    echo "cluster ${name}: $(cat "${state_root}/${name}/nodes") nodes, ${self} exec ${name}-n0 CMD"
    ;;
  down)
    name=${name:-kolo}
    down
    ;;
  run)
    ((${#args[@]} == 3 && ${#cmd[@]} > 0)) || die "usage: run NODES RANKS [options] -- CMD"
    name=${name:-k$$}
    name=${name:0:10}
    run_cmd "${args[1]}" "${args[2]}" "${cmd[@]}"
    ;;
  exec | agent)
    name=${name:-kolo}
    ((${#cmd[@]} >= 2)) || die "usage: exec NODE CMD [ARGS...]"
    if [[ ${action} == agent ]]; then
      node=${cmd[0]}
      exec_in "${node}" sh -c "${cmd[*]:1}"
    fi
    exec_in "${cmd[@]}"
    ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
