//go:build e2e

package deploy_test

// This test is in the e2e layer for its cost, not its speed: the
// Kubernetes API's own types (k8s.io/api) take longer to compile than all
// of the unit layer's other test-only code together.

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	_ "github.com/pipe-dev/pipe/stages" // registers the stage kinds
)

// The manifest decodes strictly (an unknown or misspelled field is an
// error) into the Kubernetes API's own types — a ConfigMap and a batch/v1
// Job — and says what the README promises: one pod per index, retries per
// index, exit codes mapped as pipe documents them, the run directory on a
// shared volume, and a pipeline that passes pipe check as shard I of the
// Job's completions.
func TestKubernetesIndexedJob(t *testing.T) {
	src, err := os.ReadFile("kubernetes/pipe-indexed-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(src, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("want 2 documents (ConfigMap, Job), got %d", len(docs))
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(docs[0], &cm); err != nil {
		t.Fatalf("ConfigMap: %v", err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(docs[1], &job); err != nil {
		t.Fatalf("Job: %v", err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Fatalf("kinds: %s %s, %s %s", cm.APIVersion, cm.Kind, job.APIVersion, job.Kind)
	}

	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode = %v, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Parallelism > *s.Completions {
		t.Fatalf("completions %v, parallelism %v", s.Completions, s.Parallelism)
	}
	n := int(*s.Completions)
	if s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 {
		t.Errorf("backoffLimitPerIndex = %v: a failed shard must be retried", s.BackoffLimitPerIndex)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q; podFailurePolicy and backoffLimitPerIndex need Never", pod.RestartPolicy)
	}
	actions := map[int32]batchv1.PodFailurePolicyAction{}
	if s.PodFailurePolicy == nil {
		t.Fatal("no podFailurePolicy")
	}
	for _, r := range s.PodFailurePolicy.Rules {
		if r.OnExitCodes != nil {
			if r.OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn || r.OnExitCodes.ContainerName == nil || *r.OnExitCodes.ContainerName != "pipe" {
				t.Errorf("rule %+v: want operator In on container pipe", r.OnExitCodes)
			}
			for _, c := range r.OnExitCodes.Values {
				actions[c] = r.Action
			}
		}
	}
	// pipe run: 2 is not retryable, 130 (SIGTERM) is an interruption.
	if actions[2] != batchv1.PodFailurePolicyActionFailIndex || actions[130] != batchv1.PodFailurePolicyActionIgnore || actions[1] != "" {
		t.Errorf("exit code actions %v; want 2: FailIndex, 130: Ignore, 1: counted (no rule)", actions)
	}

	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "pipe" {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("no container named pipe")
	}
	if len(c.Command) < 3 || c.Command[0] != "pipe" || c.Command[1] != "run" {
		t.Fatalf("pipe container command %q, want pipe run FILE", c.Command)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, ic := range pod.InitContainers {
		for _, m := range ic.VolumeMounts {
			if _, ok := vols[m.Name]; !ok {
				t.Errorf("init container %s mounts %q, which is no volume", ic.Name, m.Name)
			}
		}
	}
	file := c.Command[2]
	cmVol, ok := vols[mounts[filepath.Dir(file)]]
	if !ok || cmVol.ConfigMap == nil || cmVol.ConfigMap.Name != cm.Name {
		t.Fatalf("%s is not mounted from ConfigMap %s", file, cm.Name)
	}
	data, ok := vols[mounts["/data"]]
	if !ok || data.PersistentVolumeClaim == nil {
		t.Fatal("/data (run directories and outputs) is not a persistent volume claim: a replacement pod would not find its run")
	}
	text, ok := cm.Data[filepath.Base(file)]
	if !ok {
		t.Fatalf("ConfigMap has no %s", filepath.Base(file))
	}

	// The pipeline, as pod 3 of n reads it (with /data in a temp dir).
	dir := t.TempDir()
	text = strings.ReplaceAll(text, "/data/", dir+"/")
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"id":"a","prompt":"hi"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "JOB_COMPLETION_INDEX" {
			return "3", true
		}
		return "", false
	}
	f, probs := pipefile.Parse(filepath.Join(dir, "pipeline.toml"), []byte(text), pipefile.Options{Getenv: env})
	if len(probs) > 0 {
		t.Fatalf("pipeline in the ConfigMap:\n%v", probs)
	}
	if f.Shard == nil || *f.Shard != (pipefile.Shard{Index: 3, Count: n}) {
		t.Fatalf("pod 3's shard = %v, want 3/%d (the Job's completions)", f.Shard, n)
	}
	p, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	if len(probs) > 0 {
		t.Fatalf("pipeline in the ConfigMap:\n%v", probs)
	}
	name := f.Shard.Name()
	for _, u := range p.Paths() {
		if (u.Mode == "out" || u.Mode == "dir") && !strings.Contains(u.Path, name) {
			t.Errorf("%s %s = %s does not name the shard", u.Stage, u.Key, u.Path)
		}
	}
	if !slices.Contains(strings.Split(f.RunDir, "/"), name) {
		t.Errorf("run dir %s does not name the shard", f.RunDir)
	}
}
