#!/usr/bin/python3
"""scripts/slurm/ftx-generate.sbatch on a real, private, single-node Slurm.

Starts Debian's munged (its own key), slurmctld and slurmd (this host as controller and only node;
config, state, spool, sockets and logs in a temporary folder; free ports), then submits
ftx-generate.sbatch with `sbatch --wait` for 2 tasks on the CPU backend, twice: TP 2 x PP 1 (the
2-gpu folder) and TP 1 x PP 2 (the 1-gpu folder), each launched by `srun --mpi=pmix`. Each job's
output file must equal (byte for byte) that of a single-process `ftx generate` on the 1-gpu folder.
Every daemon it started is stopped at the end, failure or not (jobs are cancelled first, so no job
step outlives the test).

Skips (exit 77, with the reason) only when the Slurm or munge programs are missing or the daemons
cannot come up on this machine (their logs' last lines are printed).
Environment: FTX_BIN, FTX_FIXTURES (fixtures in $FTX_FIXTURES/pp), FTX_SOURCE_DIR.
"""
import getpass
import random
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FTX = os.path.abspath(os.environ["FTX_BIN"])
FIX = os.path.join(os.environ["FTX_FIXTURES"], "pp", "gpt2")
SRC = os.environ.get("FTX_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
SBATCH = os.path.join(SRC, "scripts", "slurm", "ftx-generate.sbatch")
SKIP = 77


def skip(msg):
    print(f"SKIP: {msg}")
    sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return f"({path}: no log)\n"


class Cluster:
    """munged + slurmctld + slurmd, each a child of this process (killed by pid at the end).

    Job steps' scratch (the PMIx plugin's spmix_appdir_*) goes under TmpFS in the temporary folder,
    and job ids start at a random FirstJobId, so nothing collides with an earlier run's leftovers."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []
        self.host = socket.gethostname().split(".")[0]
        self.conf = os.path.join(tmp, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def spawn(self, name, cmd):
        log = open(self.path(name + ".out"), "w")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.procs.append((name, p))
        return p

    def start(self):
        key = self.path("munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = self.path("munge.sock")
        self.spawn("munged", ["munged", "-F", "-f", f"--key-file={key}", f"--socket={sock}",
                              f"--log-file={self.path('munged.log')}", f"--pid-file={self.path('munged.pid')}",
                              f"--seed-file={self.path('munged.seed')}"])
        if not self.wait(lambda: os.path.exists(sock), 15):
            return "munged did not create its socket:\n" + tail(self.path("munged.out"))
        for d in ("state", "spool", "tmpfs"):
            os.makedirs(self.path(d))
        user = getpass.getuser()
        cpus = os.cpu_count() or 2
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=ftxtest
SlurmctldHost={self.host}(127.0.0.1)
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}
TmpFS={self.path('tmpfs')}
FirstJobId={random.randint(1000, 10**6)}
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd.pid')}
SlurmctldLogFile={self.path('slurmctld.log')}
SlurmdLogFile={self.path('slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=ftx Nodes={self.host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        self.spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self.spawn("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", self.host])

        def idle():
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env)
            return r.returncode == 0 and r.stdout.strip() == "idle"

        if not self.wait(idle, 60):
            return ("slurmctld/slurmd did not bring the node up within 60 s:\n" + tail(self.path("slurmctld.log")) +
                    tail(self.path("slurmd.log")) + tail(self.path("slurmctld.out")) + tail(self.path("slurmd.out")))
        return None

    def wait(self, cond, seconds):
        end = time.time() + seconds
        while time.time() < end:
            if any(p.poll() is not None for _, p in self.procs):
                return False
            if cond():
                return True
            time.sleep(0.5)
        return False

    def stop(self):
        # Jobs first, so that no job step (slurmstepd and its ftx ranks) outlives the daemons.
        if any(n == "slurmctld" and p.poll() is None for n, p in self.procs):
            subprocess.run(["scancel", "--full", "--user", getpass.getuser()], env=self.env, capture_output=True)
            end = time.time() + 30
            while time.time() < end:
                r = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=self.env)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.5)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            print(f"stopped {name} (pid {p.pid})")
        # A job step whose daemon went away first (a step still starting when its job was cancelled)
        # survives as an orphan: every process that carries this cluster's SLURM_CONF is ours.
        mine = ("SLURM_CONF=" + self.conf).encode()
        for _ in range(2):
            pids = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        if mine in f.read().split(b"\0") and int(pid) != os.getpid():
                            pids.append(int(pid))
                except OSError:
                    pass
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGTERM if _ == 0 else signal.SIGKILL)
                    print(f"stopped leftover job process {pid}")
                except OSError:
                    pass
            if not pids:
                break
            time.sleep(3)


def main():
    missing = [p for p in ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scancel", "srun")
               if not shutil.which(p)]
    if missing:
        skip(f"Slurm/munge programs not installed: {', '.join(missing)} (scripts/setup installs slurm-wlm and munge)")
    failures = []
    # Short path: the munge socket's path must fit a Unix socket name.
    tmp = tempfile.mkdtemp(prefix="ftx-slurm-", dir="/tmp")
    cluster = Cluster(tmp)
    try:
        err = cluster.start()
        if err:
            cluster.stop()
            skip("this machine cannot run the Slurm daemons: " + err)
        one = os.path.join(tmp, "one.jsonl")
        r = subprocess.run([FTX, "generate", "-m", os.path.join(FIX, "1-gpu"), "--input-ids",
                            os.path.join(FIX, "start_ids.csv"), "--max-new-tokens", "6", "--output", one, "--quiet"],
                           capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if r.returncode != 0:
            failures.append(f"single-process run failed: {r.stderr}")
        for tp, pp in ((2, 1), (1, 2)):
            out = os.path.join(tmp, f"tp{tp}_pp{pp}.jsonl")
            log = os.path.join(tmp, f"job_tp{tp}_pp{pp}.out")
            env = dict(cluster.env, FTX=FTX, MODEL=os.path.join(FIX, f"{tp}-gpu"), INPUT=os.path.join(FIX, "start_ids.csv"),
                       OUTPUT=out, TP=str(tp), PP=str(pp), DEVICE="cpu", MAX_NEW_TOKENS="6", OMP_NUM_THREADS="1")
            try:
                r = subprocess.run(["sbatch", "--wait", "--nodes=1", "--ntasks-per-node=2", "--gpus-per-task=0",
                                    "--cpus-per-task=1", "--time=15", "-o", log, SBATCH],
                                   capture_output=True, text=True, env=env, timeout=900)
            except subprocess.TimeoutExpired:
                failures.append(f"TP {tp} x PP {pp}: sbatch --wait did not return within 900 s")
                continue
            job_log = tail(log, 30)
            if r.returncode != 0:
                failures.append(f"TP {tp} x PP {pp}: sbatch exit {r.returncode}: {r.stderr.strip()}\n{job_log}")
                continue
            print(f"TP {tp} x PP {pp}: {r.stdout.strip()}\n{job_log}")
            if not os.path.exists(out):
                failures.append(f"TP {tp} x PP {pp}: no output {out}")
            elif open(out).read() != open(one).read():
                failures.append(f"TP {tp} x PP {pp}: output differs from the single-process run")
            else:
                print(f"TP {tp} x PP {pp} under sbatch: output equals the single-process run")
    finally:
        cluster.stop()
    if failures:
        for f in failures:
            print("FAIL:", f)
        print("logs in", tmp)
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("ok")


if __name__ == "__main__":
    main()
