package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Slurm is a single-node Slurm cluster of the test's own: munged,
// slurmctld and slurmd started by hand in a temporary directory (no
// systemd), with its own munge key, ports and state, and accounting off.
type Slurm struct {
	Dir  string // holds slurm.conf, state, logs
	Conf string // slurm.conf; commands find it through SLURM_CONF
	Node string
	t    testing.TB
}

// slurmPrograms are what StartSlurm needs; scripts/setup-slurm.sh installs them.
var slurmPrograms = []string{"munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "sinfo"}

func findProgram(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, true
		}
	}
	return "", false
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// StartSlurm starts the cluster and waits until its node is idle (a few
// seconds). Everything it started is stopped when the test ends, after
// every job is cancelled. Missing programs skip the test (fail it under
// PIPE_CI=1); so does not being root, which slurmd needs to start jobs.
func StartSlurm(t testing.TB) *Slurm {
	t.Helper()
	paths := map[string]string{}
	for _, p := range slurmPrograms {
		path, ok := findProgram(p)
		if !ok {
			Missing(t, "Slurm is not installed ("+p+" not found)", "scripts/setup-slurm.sh")
		}
		paths[p] = path
	}
	if os.Geteuid() != 0 {
		Missing(t, "a Slurm cluster started by a test needs root (slurmd starts jobs)", "the tests as root")
	}
	dir, err := os.MkdirTemp("", "pipe-slurm-") // short: the munge socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	node, _, _ := strings.Cut(host, ".")
	s := &Slurm{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Node: node, t: t}
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(dir, "munge.key")
	if out, err := exec.Command(paths["mungekey"], "--create", "--keyfile", key).CombinedOutput(); err != nil {
		t.Fatalf("mungekey: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "munge.sock")
	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`# written by internal/testenv.StartSlurm
ClusterName=pipetest
SlurmctldHost=%[2]s
SlurmUser=root
SlurmdUser=root
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
AuthType=auth/munge
CredType=cred/munge
# cred_expire=5: a requeued job may start again on this node after ~6 s
# instead of the default two minutes.
AuthInfo=socket=%[5]s,cred_expire=5
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node offers 4 CPUs whatever the machine has, so 4 array tasks run at once.
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
KillWait=10
NodeName=%[2]s CPUs=4 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, dir, node, ports[0], ports[1], sock)
	if err := os.WriteFile(s.Conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}

	start := func(name string, args ...string) {
		t.Helper()
		log, err := os.Create(filepath.Join(dir, name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(paths[name], args...)
		cmd.Env = s.Env()
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			log.Close()
		})
	}
	start("munged", "--foreground", "--force", "--socket="+sock, "--key-file="+key,
		"--pid-file="+filepath.Join(dir, "munged.pid"), "--log-file="+filepath.Join(dir, "munged.log"), "--seed-file="+filepath.Join(dir, "munged.seed"))
	waitFor(t, 10*time.Second, "munged's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	start("slurmctld", "-D", "-f", s.Conf)
	start("slurmd", "-D", "-f", s.Conf)
	// Registered last, so it runs first: no job outlives the cluster.
	t.Cleanup(s.cancelAll)
	waitFor(t, 30*time.Second, "the Slurm node to be idle (logs in "+dir+")", func() bool {
		out, err := s.Command("sinfo", "-h", "-o", "%T").Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
	return s
}

// Env is the environment for Slurm commands: this cluster's SLURM_CONF.
func (s *Slurm) Env() []string { return append(os.Environ(), "SLURM_CONF="+s.Conf) }

// Command is a Slurm command (sbatch, scontrol, ...) for this cluster.
func (s *Slurm) Command(name string, args ...string) *exec.Cmd {
	path, ok := findProgram(name)
	if !ok {
		path = name
	}
	cmd := exec.Command(path, args...)
	cmd.Env = s.Env()
	return cmd
}

// Job is one job (or array task) as `scontrol -o show job` shows it: its
// fields by name (JobId, ArrayJobId, ArrayTaskId, JobState, ExitCode,
// Restarts, ...). With accounting off this is where states and exit codes are.
type Job map[string]string

// Jobs lists the cluster's jobs.
func (s *Slurm) Jobs() ([]Job, error) {
	out, err := s.Command("scontrol", "-o", "show", "job").Output()
	if err != nil {
		return nil, fmt.Errorf("scontrol show job: %v", err)
	}
	var jobs []Job
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "JobId=") {
			continue
		}
		j := Job{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				j[k] = v
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// cancelAll cancels every job and waits (briefly) until none runs.
func (s *Slurm) cancelAll() {
	s.Command("scancel", "--full", "--partition=test").Run()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		jobs, err := s.Jobs()
		if err != nil {
			return
		}
		running := false
		for _, j := range jobs {
			switch j["JobState"] {
			case "RUNNING", "COMPLETING", "CONFIGURING":
				running = true
			}
		}
		if !running {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func waitFor(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
