// Package deploy holds ready-to-edit examples for running pipe's shards on
// a cluster's own scheduler (Slurm job arrays, Kubernetes Indexed Jobs);
// its tests check them. The Slurm script also runs on a real Slurm cluster
// in cmd/pipe's TestSlurmJobArray.
package deploy_test

import (
	"os/exec"
	"testing"
)

func TestSlurmScriptParses(t *testing.T) {
	out, err := exec.Command("bash", "-n", "slurm/pipe-array.sbatch").CombinedOutput()
	if err != nil {
		t.Fatalf("bash -n slurm/pipe-array.sbatch: %v\n%s", err, out)
	}
}
