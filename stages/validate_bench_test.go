package stages

import (
	"context"
	"sync"
	"time"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// firstEmitter notes when the first record arrives and stops the read.
type firstEmitter struct {
	fakeEmitter
	once   sync.Once
	at     time.Time
	cancel func()
}

func (f *firstEmitter) Emit(string, *record.Record) error {
	f.once.Do(func() { f.at = time.Now(); f.cancel() })
	return context.Canceled
}
