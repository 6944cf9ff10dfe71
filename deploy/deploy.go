// Package deploy holds ready-to-edit examples for running pipe's shards on
// a cluster's own scheduler (Slurm job arrays, Kubernetes Indexed Jobs),
// embedded so that pipe deploy writes them for a pipeline file.
package deploy

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed slurm/pipe-array.sbatch
var slurmArray string

// gresLine is the script's commented GPU request, which SlurmArray sets.
const gresLine = "## #SBATCH --gres=gpu:8"

// SlurmArray is the job-array script with the GPUs each task needs
// (#SBATCH --gres=gpu:GPUS; 0 leaves the request commented out), its
// header naming the file it was written for.
func SlurmArray(file string, gpus int) (string, error) {
	if !strings.Contains(slurmArray, gresLine) {
		return "", fmt.Errorf("deploy: the Slurm script has no %q line to set", gresLine)
	}
	s := slurmArray
	if gpus > 0 {
		s = strings.Replace(s, gresLine, fmt.Sprintf("#SBATCH --gres=gpu:%d   # the servers %s launches on the task's node (count × gpus_per_server)", gpus, file), 1)
	}
	head := fmt.Sprintf("#!/bin/bash\n# Written by pipe deploy slurm for %s.\n", file)
	return head + strings.TrimPrefix(s, "#!/bin/bash\n"), nil
}
