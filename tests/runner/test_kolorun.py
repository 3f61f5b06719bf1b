"""kolorun's command lines (bindings/python/kolo/runner.py) against golden ones: each horovodrun
flag as mpirun (or srun) gets it, root and oversubscription, the variables passed on, the
configuration file, and the refusals. The facts of the machine are fixed here (a user, 2 cores,
an environment), so the lines do not depend on where the test runs; tests/runner/CMakeLists.txt
also launches real jobs through kolorun. The last tests run real jobs too: SIGTERM or SIGHUP to
kolorun ends every rank, and a rank that ends on a lost peer's error exits cleanly."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kolo import runner

TRAMPOLINE = ("sh -c 'export RANK=\"${OMPI_COMM_WORLD_RANK:-$SLURM_PROCID}\" "
              "LOCAL_RANK=\"${OMPI_COMM_WORLD_LOCAL_RANK:-$SLURM_LOCALID}\" "
              "WORLD_SIZE=\"${OMPI_COMM_WORLD_SIZE:-$SLURM_NTASKS}\" "
              "LOCAL_WORLD_SIZE=\"${OMPI_COMM_WORLD_LOCAL_SIZE:-${SLURM_TASKS_PER_NODE%%[(,]*}}\"; "
              "exec \"$@\"' kolorun python train.py")
MPIRUN = "mpirun --tag-output -np 2 "
BIND = "-bind-to none -map-by slot "
MASTER = "-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 "


def line(args, environ=None, euid=1000, cores=2, capsys=None):
    code = runner.main(["--dry-run"] + args + ["python", "train.py"],
                       environ={} if environ is None else environ, euid=euid, cores=cores)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.strip()


@pytest.mark.parametrize("flags,middle", [
    ([], BIND + MASTER),
    (["-H", "a:2,b:2"], "-H a:2,b:2 " + BIND + "-x MASTER_ADDR=a -x MASTER_PORT=29500 "),
    (["-p", "2022"], BIND + "-mca plm_rsh_args '-p 2022' " + MASTER),
    (["-p", "2022", "-i", "/k/id"], BIND + "-mca plm_rsh_args '-p 2022 -i /k/id' " + MASTER),
    (["--network-interfaces", "eth0,ib0"],
     BIND + "-mca btl_tcp_if_include eth0,ib0 -x NCCL_SOCKET_IFNAME=eth0,ib0 " + MASTER),
    (["--output-filename", "logs"], BIND + "--output-filename logs " + MASTER),
    (["--prefix-output-with-timestamp"], BIND + "--timestamp-output " + MASTER),
    (["--binding-args", "-bind-to core"], "-bind-to core " + MASTER),
    (["--mpi-args", "-mca pml ob1"], BIND + MASTER + "-mca pml ob1 "),
    (["--start-timeout", "60"], BIND + "-x KOLO_START_TIMEOUT=60 " + MASTER),
    (["--fusion-threshold-mb", "32"], BIND + "-x KOLO_FUSION_THRESHOLD=33554432 " + MASTER),
    (["--fusion-threshold-mb", "0.5"], BIND + "-x KOLO_FUSION_THRESHOLD=524288 " + MASTER),
    (["--cycle-time-ms", "2.5"], BIND + "-x KOLO_CYCLE_TIME=2.5 " + MASTER),
    (["--cache-capacity", "2048"], BIND + "-x KOLO_CACHE_CAPACITY=2048 " + MASTER),
    (["--disable-cache"], BIND + "-x KOLO_CACHE_CAPACITY=0 " + MASTER),
    (["--hierarchical-allreduce"], BIND + "-x KOLO_HIERARCHICAL_ALLREDUCE=1 " + MASTER),
    (["--autotune", "--autotune-log-file", "at.csv"],
     BIND + "-x KOLO_AUTOTUNE=1 -x KOLO_AUTOTUNE_LOG=at.csv " + MASTER),
    (["--autotune-warmup-samples", "3", "--autotune-steps-per-sample", "10"],
     BIND + "-x KOLO_AUTOTUNE_WARMUP_SAMPLES=3 -x KOLO_AUTOTUNE_STEPS_PER_SAMPLE=10 " + MASTER),
    (["--timeline-filename", "t.json", "--timeline-mark-cycles"],
     BIND + "-x KOLO_TIMELINE=t.json -x KOLO_TIMELINE_MARK_CYCLES=1 " + MASTER),
    (["--no-stall-check"], BIND + "-x KOLO_STALL_CHECK_DISABLE=1 " + MASTER),
    (["--stall-check-warning-time-seconds", "30", "--stall-check-shutdown-time-seconds", "90"],
     BIND + "-x KOLO_STALL_CHECK_TIME_SECONDS=30 -x KOLO_STALL_SHUTDOWN_TIME_SECONDS=90 "
     + MASTER),
    (["--log-level", "DEBUG", "--log-hide-timestamp"],
     BIND + "-x KOLO_LOG_LEVEL=debug -x KOLO_LOG_HIDE_TIME=1 " + MASTER),
    (["--mpi", "--verbose"], BIND + MASTER),
])
def test_each_flag_gives_its_mpirun_line(flags, middle, capsys):
    assert line(["-np", "2"] + flags, capsys=capsys) == MPIRUN + middle + TRAMPOLINE


def test_root_sets_open_mpis_two_variables_and_more_ranks_than_cores_oversubscribe(capsys):
    assert line(["-np", "3"], euid=0, capsys=capsys) == (
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --tag-output -np 3 "
        "--oversubscribe " + BIND + MASTER + TRAMPOLINE)
    # Other hosts' slots are theirs to count: no oversubscription there.
    assert "--oversubscribe" not in line(["-np", "8", "-H", "a:4,b:4"], capsys=capsys)


def test_the_callers_settings_and_paths_reach_every_rank(capsys):
    environ = {"KOLO_CYCLE_TIME": "7", "HOROVOD_TIMELINE": "h.json", "KOLO_LOG_LEVEL": "info",
               "PATH": "/usr/bin", "PYTHONPATH": "/p", "HOME": "/root", "MASTER_PORT": "4000"}
    assert line(["-np", "2", "--log-level", "error"], environ=environ, capsys=capsys) == (
        MPIRUN + BIND + "-x KOLO_LOG_LEVEL=error -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=4000 "
        "-x HOROVOD_TIMELINE -x KOLO_CYCLE_TIME -x PATH -x PYTHONPATH " + TRAMPOLINE)


def test_a_hostfile_names_the_master(tmp_path, capsys):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# the nodes\nnode7 slots=4\nnode8 slots=4\n")
    assert line(["-np", "8", "--hostfile", str(hostfile)], capsys=capsys) == (
        "mpirun --tag-output -np 8 --hostfile %s " % hostfile + BIND +
        "-x MASTER_ADDR=node7 -x MASTER_PORT=29500 " + TRAMPOLINE)


def test_inside_a_slurm_allocation_srun_launches(capsys):
    environ = {"SLURM_JOB_ID": "42"}
    assert line(["-np", "4", "--cycle-time-ms", "2"], environ=environ, capsys=capsys) == (
        "KOLO_CYCLE_TIME=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "
        "srun --ntasks 4 --mpi=pmix " + TRAMPOLINE)
    # -H, or KOLORUN_LAUNCHER=mpirun, keep mpirun.
    environ["KOLORUN_LAUNCHER"] = "mpirun"
    assert line(["-np", "2"], environ=environ, capsys=capsys).startswith("mpirun ")


def test_a_config_file_sets_what_the_flags_do_and_flags_win(tmp_path, capsys):
    config = tmp_path / "kolo.yaml"
    config.write_text(textwrap.dedent("""\
        params:
          fusion_threshold_mb: 32
          cycle_time_ms: 10
          cache_capacity: 2048
          hierarchical_allreduce: true
        autotune:
          enabled: true
          log_file: at.csv
        timeline:
          filename: t.json
          mark_cycles: true
        stall_check:
          warning_time_seconds: 120
          shutdown_time_seconds: 240
        logging:
          level: INFO
          hide_timestamp: true
        """))
    assert line(["-np", "2", "--config-file", str(config), "--cycle-time-ms", "3"],
                capsys=capsys) == (
        MPIRUN + BIND + "-x KOLO_FUSION_THRESHOLD=33554432 -x KOLO_CYCLE_TIME=3 "
        "-x KOLO_CACHE_CAPACITY=2048 -x KOLO_HIERARCHICAL_ALLREDUCE=1 -x KOLO_AUTOTUNE=1 "
        "-x KOLO_AUTOTUNE_LOG=at.csv -x KOLO_TIMELINE=t.json -x KOLO_TIMELINE_MARK_CYCLES=1 "
        "-x KOLO_STALL_CHECK_TIME_SECONDS=120 -x KOLO_STALL_SHUTDOWN_TIME_SECONDS=240 "
        "-x KOLO_LOG_LEVEL=info -x KOLO_LOG_HIDE_TIME=1 " + MASTER + TRAMPOLINE)


def refusal(args, capsys, environ=None):
    code = runner.main(args, environ={} if environ is None else environ, euid=1000, cores=2)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err  # one line
    return err.strip()


@pytest.mark.parametrize("flag,why", sorted(runner.REFUSED.items()))
def test_flags_kolo_has_no_counterpart_for_are_refused(flag, why, capsys):
    assert refusal(["-np", "2", flag, "python", "train.py"], capsys) == (
        "kolorun: %s (%s) is not supported by kolo; run without it" % (flag, why))


def test_refusals_of_incomplete_command_lines(tmp_path, capsys):
    assert refusal(["python", "train.py"], capsys) == (
        "kolorun: -np must be given, a number of ranks of at least 1")
    assert refusal(["-np", "2"], capsys) == (
        "kolorun: no command to run (e.g. kolorun -np 2 python train.py)")
    assert refusal(["-np", "2", "-H", "a:2", "--hostfile", "h", "python"], capsys) == (
        "kolorun: -H and --hostfile: give one of them")
    config = tmp_path / "c.yaml"
    config.write_text("params:\n  hierarchical_allgather: true\n")
    assert refusal(["-np", "2", "--config-file", str(config), "python"], capsys) == (
        "kolorun: --config-file %s: params.hierarchical_allgather is not supported by kolo"
        % config)


def test_a_missing_launcher_names_the_package(capsys):
    assert refusal(["-np", "2", "python"], capsys, environ={"PATH": "/nonexistent"}) == (
        "kolorun: mpirun is not on PATH (Debian: openmpi-bin)")


def test_version_and_check_build(capsys):
    import kolo
    assert runner.main(["--version"], environ={}) == 0
    assert capsys.readouterr().out == "kolo %s\n" % kolo.__version__
    assert runner.main(["--check-build"], environ={}) == 0
    out = capsys.readouterr().out
    assert out.startswith("kolo v%s:\n" % kolo.__version__)
    for row in ("Available Frameworks:", "[X] MPI", "Available Transports:", "GPU support:"):
        assert row in out
    from kolo import _kolo
    assert ("    [%s] UCX (KOLO_TRANSPORT=ucx)\n" % ("X" if _kolo.built_with_ucx() else " ")) in out


def test_a_rank_that_finds_a_flag_unapplied_fails_the_job():
    """rank_env_check.py, which the launch tests run, can fail: given another cycle time than it
    expects, every rank reports it and kolorun exits non-zero."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ)
    env.setdefault("KOLO_BUILD_DIR", os.path.join(root, "build"))
    done = subprocess.run(
        [os.path.join(root, "scripts", "kolorun"), "-np", "2", "--cycle-time-ms", "4",
         "--fusion-threshold-mb", "2", sys.executable, os.path.join(here, "rank_env_check.py")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        timeout=120)
    assert done.returncode != 0, done.stdout
    assert "KOLO_CYCLE_TIME='4' (want '3')" in done.stdout, done.stdout


def test_gloo_launches_on_this_host_without_mpi(capsys):
    """--gloo: kolo.local_launch by this interpreter, the KOLO_* variables in its environment;
    no mpirun, no trampoline (kolo.local_launch sets torchrun's variables itself)."""
    assert line(["--gloo", "-np", "3", "--cycle-time-ms", "3", "--nics", "eth0"],
                capsys=capsys) == (
        "KOLO_CYCLE_TIME=3 NCCL_SOCKET_IFNAME=eth0 UCX_NET_DEVICES=eth0 %s -m kolo.local_launch "
        "-np 3 -- python train.py" % sys.executable)
    # On this host by name, too; root changes nothing (there is no mpirun to allow it).
    assert line(["--gloo", "-np", "2", "-H", "localhost:2"], euid=0, capsys=capsys) == (
        "%s -m kolo.local_launch -np 2 -- python train.py" % sys.executable)


@pytest.mark.parametrize("flags,message", [
    (["-p", "2022"], "-p/--ssh-port is mpirun's; --gloo launches without mpirun"),
    (["--mpi-args", "-x A"], "--mpi-args is mpirun's; --gloo launches without mpirun"),
    (["--output-filename", "logs"],
     "--output-filename is mpirun's; --gloo launches without mpirun"),
    (["--mpi"], "--mpi and --gloo: give one of them"),
    (["-H", "localhost:1,b:1"],
     "--gloo launches on this host only (b named); across hosts start each host's ranks with "
     "torchrun or srun, which kolo starts from"),
])
def test_gloo_refuses_what_only_mpirun_does(flags, message, capsys):
    assert refusal(["--gloo", "-np", "2"] + flags + ["python", "train.py"], capsys) == (
        "kolorun: " + message)


def test_local_launch_names_the_rank_that_failed_and_how():
    """The first rank that fails is named with how it ended, and its status is the job's."""
    script = textwrap.dedent("""\
        import os, signal, sys, time
        rank = int(os.environ["RANK"])
        if rank == 1:
            sys.exit(3)
        if rank == 2:
            time.sleep(1)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(30)
        """)
    done = subprocess.run(
        [sys.executable, "-m", "kolo.local_launch", "-np", "3", "--grace", "2", "--",
         "/usr/bin/python3", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert re.search(r"kolo.local_launch: rank 1 \(pid \d+\) exited with status 3; ending "
                     r"the job", done.stderr), done.stderr
    from kolo import local_launch
    assert local_launch._how_it_ended(-9) == "was killed by SIGKILL"
    assert local_launch._how_it_ended(-200) == "was killed by signal 200"


def test_local_launch_gives_each_rank_torchruns_variables():
    from kolo import local_launch
    envs = local_launch.rank_environments(
        3, {"PATH": "/bin", "OMPI_COMM_WORLD_SIZE": "3", "PMIX_RANK": "0"})
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "2"]
    for e in envs:
        assert (e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"]) == ("3", "3", "0")
        assert e["MASTER_ADDR"] == "127.0.0.1" and e["MASTER_PORT"] == envs[0]["MASTER_PORT"]
        assert e["KOLO_JOB_ID"] == envs[0]["KOLO_JOB_ID"] != ""
        assert "OMPI_COMM_WORLD_SIZE" not in e and "PMIX_RANK" not in e and e["PATH"] == "/bin"
    assert envs[0]["MASTER_PORT"].isdigit()
    # Two launches, two tokens: a rank of one job is refused by the other's rendezvous.
    assert local_launch.rank_environments(1, {})[0]["KOLO_JOB_ID"] != envs[0]["KOLO_JOB_ID"]
    # The environment's own address, port and token win.
    mine = local_launch.rank_environments(
        1, {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4000", "KOLO_JOB_ID": "j"})[0]
    assert (mine["MASTER_ADDR"], mine["MASTER_PORT"], mine["KOLO_JOB_ID"]) == (
        "10.0.0.1", "4000", "j")


RANK_LOOP = textwrap.dedent("""\
    import os, sys, time
    import torch
    import kolo.torch as hvd
    hvd.init()
    t = torch.ones(1024)
    hvd.allreduce_(t, op=hvd.Sum, name="first")
    assert t[0].item() == hvd.size(), t[0].item()
    with open(os.path.join(sys.argv[1], "rank.%d" % hvd.rank()), "w") as f:
        f.write(str(os.getpid()))
    while True:
        hvd.allreduce_(torch.ones(1024), name="loop")
        time.sleep(0.01)
    """)


def running(pid):
    """Whether `pid` is a process that has not ended (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("mode", [["--gloo"], []], ids=["gloo", "mpirun"])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_sent_to_kolorun_ends_every_rank(mode, stop, tmp_path):
    """A scheduler or a sweep driver stops a job with SIGTERM (a closed terminal: SIGHUP) to
    the process it started: kolorun passes it to its launcher, and every rank ends. Each rank
    writes its pid once the job runs (after an all-reduce checked against the ranks' sum)."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ)
    env.setdefault("KOLO_BUILD_DIR", os.path.join(root, "build"))
    script = tmp_path / "loop.py"
    script.write_text(RANK_LOOP)
    job = subprocess.Popen(
        [os.path.join(root, "scripts", "kolorun")] + mode +
        ["-np", "2", "/usr/bin/python3", str(script), str(tmp_path)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    try:
        until = time.monotonic() + 90
        pids = []
        while len(pids) < 2 and time.monotonic() < until and job.poll() is None:
            time.sleep(0.2)
            pids = [int((tmp_path / ("rank.%d" % r)).read_text() or 0)
                    for r in range(2) if (tmp_path / ("rank.%d" % r)).exists()]
        assert len(pids) == 2 and all(pids), "the job did not start: %s" % (
            job.communicate(timeout=30)[0] if job.poll() is not None else "still starting")
        job.send_signal(stop)
        out = job.communicate(timeout=60)[0]
        until = time.monotonic() + 30
        while any(running(p) for p in pids) and time.monotonic() < until:
            time.sleep(0.2)
        left = [p for p in pids if running(p)]
        assert not left, "ranks %s still run after kolorun ended (%s):\n%s" % (
            left, job.returncode, out)
        assert job.returncode != 0, out
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        for r in range(2):
            path = tmp_path / ("rank.%d" % r)
            if path.exists() and path.read_text() and running(int(path.read_text())):
                os.kill(int(path.read_text()), signal.SIGKILL)


SURVIVOR = textwrap.dedent("""\
    import os, sys, time
    import torch
    import kolo.torch as hvd
    hvd.init()
    x = torch.ones(8_000_000)
    hvd.allreduce_(x, name="first")
    with open(os.path.join(sys.argv[1], "rank.%d" % hvd.rank()), "w") as f:
        f.write(str(os.getpid()))
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        hvd.allreduce_(x, name="grad")  # no try/except and no shutdown, as a training script
    """)


def test_a_survivor_that_ends_on_a_lost_peers_error_exits_cleanly(tmp_path):
    """A rank whose peer is killed while they exchange data gets kolo's error and, like most
    training scripts, ends on it without hvd.shutdown(). kolo's background thread must not
    crash the exiting process by logging after the interpreter's teardown has begun (a logger
    destroyed at exit crashed such a rank now and then: SIGSEGV). Ranks started as torchrun
    starts them (kolo.local_launch's variables), rank 1 killed two seconds into the loop, three
    times; rank 0 must end as Python ends on an uncaught exception (status 1)."""
    from kolo import local_launch
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.environ.get("KOLO_BUILD_DIR",
                           os.path.join(os.path.dirname(os.path.dirname(here)), "build"))
    script = tmp_path / "survivor.py"
    script.write_text(SURVIVOR)
    base = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    for attempt in range(3):
        for r in range(2):
            if (tmp_path / ("rank.%d" % r)).exists():
                (tmp_path / ("rank.%d" % r)).unlink()
        ranks = [subprocess.Popen(["/usr/bin/python3", str(script), str(tmp_path)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  universal_newlines=True)
                 for env in local_launch.rank_environments(2, base)]
        try:
            until = time.monotonic() + 90
            pid = tmp_path / "rank.1"
            while not (pid.exists() and pid.read_text()) and time.monotonic() < until:
                time.sleep(0.1)
            assert pid.exists(), "attempt %d: rank 1 did not start" % attempt
            time.sleep(2)
            os.kill(int(pid.read_text()), signal.SIGKILL)
            out = ranks[0].communicate(timeout=90)[0]
        finally:
            for p in ranks:
                if p.poll() is None:
                    p.kill()
                p.wait()
        assert ranks[0].returncode == 1, "attempt %d: rank 0 ended with %d:\n%s" % (
            attempt, ranks[0].returncode, out)
        assert "is gone" in out, "attempt %d:\n%s" % (attempt, out)
