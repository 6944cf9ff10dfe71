package stages

import (
	"github.com/pipe-dev/pipe/pipeline/record"
)

// collectEmitter keeps what a stage sends on, by port.
type collectEmitter struct {
	s3Emitter
	sent map[string][]*record.Record
}

func (c *collectEmitter) Emit(port string, r *record.Record) error {
	if c.sent == nil {
		c.sent = map[string][]*record.Record{}
	}
	c.sent[port] = append(c.sent[port], r)
	return nil
}
