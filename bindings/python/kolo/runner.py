"""kolorun: horovodrun's command line for kolo, over mpirun (or srun inside a Slurm allocation),
or without MPI on this host (``--gloo``, horovodrun's flag for its own launcher).

    kolorun -np 4 -H node1:2,node2:2 python train.py
    kolorun --gloo -np 2 python train.py

Each horovodrun flag becomes what kolo reads (a KOLO_* variable, forwarded to every rank with
mpirun's -x) or what mpirun does itself (hosts, ssh port, interfaces, output files), on the line
horovodrun builds (``-bind-to none -map-by slot``, ``--tag-output``). Every rank also gets
torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE from the launcher's own,
MASTER_ADDR and MASTER_PORT), so scripts written for torchrun run unchanged. As root it sets Open
MPI's two allow-run-as-root variables; with more ranks than cores on this machine, it
oversubscribes. With ``--gloo`` the ranks start on this host through kolo.local_launch, as
torchrun starts them: kolo meets over its TCP rendezvous and runs over UCX, with no MPI launcher
(flags that only mpirun understands are refused then). ``--dry-run`` prints the command and
exits. A horovodrun flag kolo has no counterpart for (elastic mode, jsrun, ...) is refused with
one line, never ignored.

The command is built by ``launch_command`` from the parsed flags and the facts of the machine
(environment, user, cores), so tests compare its lines with golden ones.
"""

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys

# torchrun's per-rank variables, from the launcher's: Open MPI's, else Slurm's (srun). Slurm's
# tasks per node read like "2(x3)" or "2,1": the first node's count is taken.
RANK_ENV = (
    'export RANK="${OMPI_COMM_WORLD_RANK:-$SLURM_PROCID}" '
    'LOCAL_RANK="${OMPI_COMM_WORLD_LOCAL_RANK:-$SLURM_LOCALID}" '
    'WORLD_SIZE="${OMPI_COMM_WORLD_SIZE:-$SLURM_NTASKS}" '
    'LOCAL_WORLD_SIZE="${OMPI_COMM_WORLD_LOCAL_SIZE:-${SLURM_TASKS_PER_NODE%%[(,]*}}"; '
    'exec "$@"')

# Passed to every rank as they are, for ranks on other hosts (mpirun's own children inherit its
# environment): where Python, its packages and kolo's libraries are.
FORWARDED_AS_IS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH")

# torchrun's default rendezvous port (MASTER_PORT unless the environment sets one).
DEFAULT_MASTER_PORT = "29500"

# horovodrun flags kolo has no counterpart for, and why.
REFUSED = {
    "--min-np": "elastic training",
    "--max-np": "elastic training",
    "--slots-per-host": "elastic training",
    "--host-discovery-script": "elastic training",
    "--reset-limit": "elastic training",
    "--cooldown-range": "elastic training",
    "--blacklist-cooldown-range": "elastic training",
    "--elastic-timeout": "elastic training",
    "--gloo-timeout-seconds": "Gloo's timeout (kolo's start without MPI waits --start-timeout)",
    "--jsrun": "IBM's jsrun launcher",
    "--ccl-bgt-affinity": "oneCCL",
    "--num-nccl-streams": "several NCCL streams per process",
    "--thread-affinity": "pinning kolo's background thread",
    "--mpi-threads-disable": "MPI without threads (kolo's background thread needs them)",
    "--hierarchical-allgather": "a hierarchical all-gather",
    "--autotune-bayes-opt-max-samples": "Bayesian optimisation (kolo's autotune is a sweep)",
    "--autotune-gaussian-process-noise": "Bayesian optimisation (kolo's autotune is a sweep)",
    "--tcp": "choosing MPI's transport (use --mpi-args)",
}

# horovodrun's --config-file sections and keys, and the flag each sets (horovodrun's YAML).
CONFIG_KEYS = {
    ("params", "fusion_threshold_mb"): "fusion_threshold_mb",
    ("params", "cycle_time_ms"): "cycle_time_ms",
    ("params", "cache_capacity"): "cache_capacity",
    ("params", "hierarchical_allreduce"): "hierarchical_allreduce",
    ("autotune", "enabled"): "autotune",
    ("autotune", "log_file"): "autotune_log_file",
    ("autotune", "warmup_samples"): "autotune_warmup_samples",
    ("autotune", "steps_per_sample"): "autotune_steps_per_sample",
    ("timeline", "filename"): "timeline_filename",
    ("timeline", "mark_cycles"): "timeline_mark_cycles",
    ("stall_check", "enabled"): "stall_check",
    ("stall_check", "warning_time_seconds"): "stall_check_warning_time_seconds",
    ("stall_check", "shutdown_time_seconds"): "stall_check_shutdown_time_seconds",
    ("logging", "level"): "log_level",
    ("logging", "hide_timestamp"): "log_hide_timestamp",
}


class UsageError(Exception):
    """A command line kolorun refuses; the message is the one line it prints."""


class _Refuse(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        raise UsageError("%s (%s) is not supported by kolo; run without it" %
                         (option_string, REFUSED[self.dest_flag]))


def build_parser():
    p = argparse.ArgumentParser(
        prog="kolorun", allow_abbrev=False,
        description="Launch a kolo job: horovodrun's flags, over mpirun (srun in Slurm).")
    a = p.add_argument
    a("-v", "--version", action="store_true", help="print kolo's version and exit")
    a("-np", "--num-proc", dest="np", type=int, help="number of ranks")
    a("-cb", "--check-build", action="store_true",
      help="list the frameworks, transports and GPU support kolo was built with, and exit")
    a("--dry-run", action="store_true", help="print the launch command and exit")
    a("--verbose", action="store_true", help="print the launch command before running it")
    a("--config-file", help="horovodrun's YAML configuration (flags given here override it)")
    a("-H", "--hosts", help="host:slots,... (mpirun -H)")
    a("-hostfile", "--hostfile", help="a hostfile (mpirun --hostfile)")
    a("-p", "--ssh-port", type=int, help="ssh port of the other hosts")
    a("-i", "--ssh-identity-file", help="ssh identity file for the other hosts")
    a("--network-interfaces", "--network-interface", "--nics", dest="nics",
      help="interfaces for MPI's and NCCL's traffic, comma-separated")
    a("--output-filename", help="a folder for each rank's output (mpirun --output-filename)")
    a("--prefix-output-with-timestamp", action="store_true",
      help="time stamps on each line of output")
    a("--mpi", action="store_true", help="launch with mpirun (the default)")
    a("--gloo", action="store_true",
      help="launch without MPI, on this host: torchrun's variables, kolo's TCP rendezvous, UCX")
    a("--mpi-args", help="more arguments for mpirun, as one string")
    a("--binding-args", help="mpirun's binding arguments instead of -bind-to none -map-by slot")
    a("--start-timeout", type=float, help="KOLO_START_TIMEOUT, seconds")
    a("--fusion-threshold-mb", dest="fusion_threshold_mb", type=float,
      help="KOLO_FUSION_THRESHOLD, in MiB")
    a("--cycle-time-ms", type=float, help="KOLO_CYCLE_TIME, ms")
    a("--cache-capacity", type=int, help="KOLO_CACHE_CAPACITY, entries")
    a("--disable-cache", action="store_true", help="KOLO_CACHE_CAPACITY=0")
    a("--hierarchical-allreduce", action="store_true", default=None,
      help="KOLO_HIERARCHICAL_ALLREDUCE=1")
    a("--autotune", action="store_true", default=None, help="KOLO_AUTOTUNE=1")
    a("--autotune-log-file", help="KOLO_AUTOTUNE_LOG")
    a("--autotune-warmup-samples", type=int, help="KOLO_AUTOTUNE_WARMUP_SAMPLES")
    a("--autotune-steps-per-sample", type=int, help="KOLO_AUTOTUNE_STEPS_PER_SAMPLE")
    a("--timeline-filename", help="KOLO_TIMELINE")
    a("--timeline-mark-cycles", action="store_true", default=None,
      help="KOLO_TIMELINE_MARK_CYCLES=1")
    a("--no-stall-check", dest="stall_check", action="store_false", default=None,
      help="KOLO_STALL_CHECK_DISABLE=1")
    a("--stall-check-warning-time-seconds", type=float, help="KOLO_STALL_CHECK_TIME_SECONDS")
    a("--stall-check-shutdown-time-seconds", type=float,
      help="KOLO_STALL_SHUTDOWN_TIME_SECONDS")
    a("--log-level", help="KOLO_LOG_LEVEL (trace, debug, info, warning, error, fatal)")
    a("--log-hide-timestamp", action="store_true", default=None, help="KOLO_LOG_HIDE_TIME=1")
    for flag in REFUSED:
        action = a(flag, action=_Refuse, nargs="?", help=argparse.SUPPRESS)
        action.dest_flag = flag
    a("command", nargs=argparse.REMAINDER, help="the program each rank runs, with its arguments")
    return p


def _number(x):
    return ("%d" % x) if float(x).is_integer() else repr(float(x))


def _apply_config(opts, path):
    try:
        import yaml
    except ImportError:
        raise UsageError("--config-file needs PyYAML (Debian: python3-yaml)")
    try:
        with open(path) as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise UsageError("--config-file %s: %s" % (path, e))
    for section, values in config.items():
        if not isinstance(values, dict):
            raise UsageError("--config-file %s: '%s' is not a section of keys" % (path, section))
        for key, value in values.items():
            dest = CONFIG_KEYS.get((section, key))
            if dest is None:
                raise UsageError("--config-file %s: %s.%s is not supported by kolo" %
                                 (path, section, key))
            if getattr(opts, dest) is None:  # a flag on the command line wins
                setattr(opts, dest, value)


def kolo_environment(opts):
    """The KOLO_* variables the flags set, in the order of horovodrun's flags."""
    env = []

    def put(name, value):
        if value is not None:
            env.append((name, value))

    put("KOLO_START_TIMEOUT", None if opts.start_timeout is None else _number(opts.start_timeout))
    if opts.fusion_threshold_mb is not None:
        put("KOLO_FUSION_THRESHOLD", "%d" % int(float(opts.fusion_threshold_mb) * 1024 * 1024))
    put("KOLO_CYCLE_TIME", None if opts.cycle_time_ms is None else _number(opts.cycle_time_ms))
    if opts.disable_cache:
        put("KOLO_CACHE_CAPACITY", "0")
    elif opts.cache_capacity is not None:
        put("KOLO_CACHE_CAPACITY", "%d" % int(opts.cache_capacity))
    if opts.hierarchical_allreduce:
        put("KOLO_HIERARCHICAL_ALLREDUCE", "1")
    if opts.autotune:
        put("KOLO_AUTOTUNE", "1")
    put("KOLO_AUTOTUNE_LOG", opts.autotune_log_file)
    if opts.autotune_warmup_samples is not None:
        put("KOLO_AUTOTUNE_WARMUP_SAMPLES", "%d" % int(opts.autotune_warmup_samples))
    if opts.autotune_steps_per_sample is not None:
        put("KOLO_AUTOTUNE_STEPS_PER_SAMPLE", "%d" % int(opts.autotune_steps_per_sample))
    put("KOLO_TIMELINE", opts.timeline_filename)
    if opts.timeline_mark_cycles:
        put("KOLO_TIMELINE_MARK_CYCLES", "1")
    if opts.stall_check is False:
        put("KOLO_STALL_CHECK_DISABLE", "1")
    if opts.stall_check_warning_time_seconds is not None:
        put("KOLO_STALL_CHECK_TIME_SECONDS", _number(opts.stall_check_warning_time_seconds))
    if opts.stall_check_shutdown_time_seconds is not None:
        put("KOLO_STALL_SHUTDOWN_TIME_SECONDS", _number(opts.stall_check_shutdown_time_seconds))
    if opts.log_level is not None:
        put("KOLO_LOG_LEVEL", str(opts.log_level).lower())
    if opts.log_hide_timestamp:
        put("KOLO_LOG_HIDE_TIME", "1")
    return env


def _master_addr(opts):
    if opts.hosts:
        return opts.hosts.split(",")[0].split(":")[0]
    if opts.hostfile:
        try:
            with open(opts.hostfile) as f:
                for line in f:
                    words = line.split("#")[0].split()
                    if words:
                        return words[0]
        except OSError as e:
            raise UsageError("--hostfile %s: %s" % (opts.hostfile, e))
    return "127.0.0.1"


# mpirun's flags, which a launch without MPI has no use for: refused with --gloo, not ignored.
MPIRUN_ONLY = (("ssh_port", "-p/--ssh-port"), ("ssh_identity_file", "-i/--ssh-identity-file"),
               ("mpi_args", "--mpi-args"), ("binding_args", "--binding-args"),
               ("output_filename", "--output-filename"),
               ("prefix_output_with_timestamp", "--prefix-output-with-timestamp"))

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def _local_launch_command(opts, environ, command, kolo_env):
    """kolorun --gloo: the ranks on this host, started by kolo.local_launch."""
    if opts.mpi:
        raise UsageError("--mpi and --gloo: give one of them")
    for dest, flag in MPIRUN_ONLY:
        if getattr(opts, dest):
            raise UsageError("%s is mpirun's; --gloo launches without mpirun" % flag)
    hosts = []
    if opts.hosts:
        hosts = [h.split(":")[0] for h in opts.hosts.split(",") if h]
    elif opts.hostfile:
        hosts = [_master_addr(opts)]
    remote = [h for h in hosts if h not in LOCAL_HOSTS]
    if remote:
        raise UsageError("--gloo launches on this host only (%s named); across hosts start "
                         "each host's ranks with torchrun or srun, which kolo starts from" %
                         ", ".join(remote))
    launcher_env = dict(kolo_env)
    if opts.nics:
        # The interfaces for UCX's traffic and NCCL's (there is no MPI here).
        launcher_env.update(UCX_NET_DEVICES=opts.nics, NCCL_SOCKET_IFNAME=opts.nics)
    # MASTER_ADDR and MASTER_PORT: the environment's, else 127.0.0.1 and a free port
    # (kolo.local_launch), as torchrun --standalone chooses.
    argv = [sys.executable, "-m", "kolo.local_launch", "-np", str(opts.np), "--"] + command
    return argv, launcher_env


def launch_command(opts, environ, euid, cores):
    """(argv, variables to add to the launcher's environment) for the parsed `opts`.

    `environ`: the environment kolorun runs in; `euid`: its user id (0: root); `cores`: this
    machine's cores (more ranks than that, on this machine alone, oversubscribe).
    """
    if opts.np is None or opts.np < 1:
        raise UsageError("-np must be given, a number of ranks of at least 1")
    if not opts.command:
        raise UsageError("no command to run (e.g. kolorun -np 2 python train.py)")
    if opts.hosts and opts.hostfile:
        raise UsageError("-H and --hostfile: give one of them")
    command = list(opts.command)
    if command and command[0] == "--":
        command = command[1:]
    kolo_env = kolo_environment(opts)
    if opts.gloo:
        return _local_launch_command(opts, environ, command, kolo_env)
    torch_env = [("MASTER_ADDR", environ.get("MASTER_ADDR") or _master_addr(opts)),
                 ("MASTER_PORT", environ.get("MASTER_PORT") or DEFAULT_MASTER_PORT)]
    set_names = {name for name, _ in kolo_env + torch_env}
    # The caller's own KOLO_*/HOROVOD_* settings go to every rank too (a flag overrides one).
    forwarded = sorted(n for n in environ
                       if n.startswith(("KOLO_", "HOROVOD_")) and n not in set_names)
    trampoline = ["sh", "-c", RANK_ENV, "kolorun"] + command
    launcher_env = {}

    if (environ.get("SLURM_JOB_ID") and not opts.hosts and not opts.hostfile and
            environ.get("KOLORUN_LAUNCHER", "") != "mpirun"):
        # srun passes the whole environment on; the variables kolorun sets go in srun's own.
        argv = ["srun", "--ntasks", str(opts.np), "--mpi=pmix"]
        if opts.output_filename:
            argv += ["--output", os.path.join(opts.output_filename, "rank.%t.out")]
        if opts.mpi_args:
            argv += shlex.split(opts.mpi_args)
        launcher_env.update(kolo_env + torch_env)
        return argv + trampoline, launcher_env

    argv = ["mpirun", "--tag-output", "-np", str(opts.np)]
    if opts.hosts:
        argv += ["-H", opts.hosts]
    elif opts.hostfile:
        argv += ["--hostfile", opts.hostfile]
    elif opts.np > cores:
        argv += ["--oversubscribe"]
    argv += shlex.split(opts.binding_args) if opts.binding_args else [
        "-bind-to", "none", "-map-by", "slot"]
    rsh = []
    if opts.ssh_port is not None:
        rsh += ["-p", str(opts.ssh_port)]
    if opts.ssh_identity_file:
        rsh += ["-i", opts.ssh_identity_file]
    if rsh:
        argv += ["-mca", "plm_rsh_args", " ".join(rsh)]
    if opts.nics:
        argv += ["-mca", "btl_tcp_if_include", opts.nics, "-x", "NCCL_SOCKET_IFNAME=" + opts.nics]
    if opts.output_filename:
        argv += ["--output-filename", opts.output_filename]
    if opts.prefix_output_with_timestamp:
        argv += ["--timestamp-output"]
    for name, value in kolo_env + torch_env:
        argv += ["-x", "%s=%s" % (name, value)]
    for name in forwarded + [n for n in FORWARDED_AS_IS if n in environ]:
        argv += ["-x", name]
    if opts.mpi_args:
        argv += shlex.split(opts.mpi_args)
    if euid == 0:
        # Open MPI refuses root without both.
        launcher_env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        launcher_env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return argv + trampoline, launcher_env


def format_command(argv, launcher_env):
    """The command as one shell line: the launcher's added variables, then its arguments."""
    prefix = ["%s=%s" % (n, shlex.quote(str(v))) for n, v in sorted(launcher_env.items())]
    return " ".join(prefix + [shlex.quote(a) for a in argv])


def check_build():
    import kolo
    from kolo import _kolo
    try:
        import torch  # noqa: F401
        torch_line = "    [X] PyTorch (kolo.torch; torch %s)" % torch.__version__
    except ImportError:
        torch_line = "    [ ] PyTorch (torch is not importable by %s)" % sys.executable
    mark = lambda b: "X" if b else " "  # noqa: E731
    return "\n".join([
        "kolo v%s:" % kolo.__version__,
        "",
        "Available Frameworks:",
        torch_line,
        "",
        "Available Controllers:",
        "    [X] MPI",
        "    [%s] kolo's TCP rendezvous (a start without MPI: torchrun, srun, kolorun --gloo)" %
        mark(_kolo.built_with_ucx()),
        "    [ ] Gloo",
        "",
        "Available Transports:",
        "    [X] MPI",
        "    [%s] UCX (KOLO_TRANSPORT=ucx)" % mark(_kolo.built_with_ucx()),
        "",
        "Available Tensor Operations:",
        "    [%s] NCCL (opened at run time)" % mark(_kolo.built_with_nccl()),
        "    [X] MPI",
        "    [X] kolo's own host algorithms (ring, tree, recursive doubling, Rabenseifner, "
        "shared memory, hierarchical)",
        "",
        "GPU support:",
        "    [%s] CUDA" % mark(_kolo.built_with_cuda()),
    ])


def main(argv=None, environ=None, euid=None, cores=None):
    environ = dict(os.environ if environ is None else environ)
    parser = build_parser()
    try:
        opts = parser.parse_args(sys.argv[1:] if argv is None else argv)
        if opts.version:
            import kolo
            print("kolo %s" % kolo.__version__)
            return 0
        if opts.check_build:
            print(check_build())
            return 0
        if opts.config_file:
            _apply_config(opts, opts.config_file)
        cmd, launcher_env = launch_command(
            opts, environ, os.geteuid() if euid is None else euid,
            (os.cpu_count() or 1) if cores is None else cores)
    except UsageError as e:
        print("kolorun: %s" % e, file=sys.stderr)
        return 2
    line = format_command(cmd, launcher_env)
    if opts.dry_run:
        print(line)
        return 0
    if opts.verbose:
        print(line, file=sys.stderr)
    if not opts.gloo and shutil.which(cmd[0], path=environ.get("PATH")) is None:
        print("kolorun: %s is not on PATH (Debian: %s)" %
              (cmd[0], "openmpi-bin" if cmd[0] == "mpirun" else "slurm-client"), file=sys.stderr)
        return 2
    environ.update(launcher_env)
    return run_launcher(cmd, environ)


def run_launcher(cmd, environ):
    """Runs the launcher (mpirun, srun, kolo.local_launch) and returns its exit status (128 + N
    when a signal N ended it, as a shell gives).

    SIGTERM and SIGHUP sent to kolorun alone, as a scheduler, a sweep driver or ``kill`` sends
    them, go on to the launcher, which ends every rank; without that kolorun ended and left the
    job running. Ctrl-C in a terminal reaches the launcher by itself (the terminal signals the
    whole foreground group), and Open MPI's mpirun takes a second SIGINT soon after the first as
    a forced abort, so SIGINT is not passed on: kolorun then waits for the launcher to end the
    job, and a launcher still running 10 s later (``kill -INT`` of kolorun alone) gets SIGTERM.
    Off the main thread Python cannot catch signals, and nothing is passed on."""
    forwarded = (signal.SIGTERM, signal.SIGHUP)
    child = None
    pending = []  # a stop that came before the launcher existed

    def forward(signum, frame):
        if child is None:
            pending.append(signum)
        elif child.poll() is None:
            child.send_signal(signum)

    try:
        previous = {s: signal.signal(s, forward) for s in forwarded}
    except ValueError:  # not the main thread
        previous = {}
    ctrl_c = False   # Ctrl-C came: the exit status is 130, as a shell's
    waiting = False  # ... and the launcher has 10 s to end the job by itself
    try:
        child = subprocess.Popen(cmd, env=environ)
        for signum in pending:
            forward(signum, None)
        while True:
            try:
                if not waiting:
                    status = child.wait()
                    break
                try:
                    status = child.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    forward(signal.SIGTERM, None)
                    waiting = False  # the launcher ends the job now: wait for it
            except KeyboardInterrupt:
                ctrl_c = waiting = True
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if ctrl_c:
        return 130
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main())
