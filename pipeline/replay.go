package pipeline

import "github.com/pipe-dev/pipe/pipeline/output"

// replayer is the kind that replays what (ReplaysJournal or
// ReplaysOutput), first in kind order; "" when none is registered.
func (r *Registry) replayer(what string) (string, *output.ReplaySpec) {
	for _, k := range r.Kinds() {
		if s := r.Lookup(k); s.Replay != nil && s.Replay.Reads == what {
			return k, s.Replay
		}
	}
	return "", nil
}
