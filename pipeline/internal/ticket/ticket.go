// Package ticket is the engine's bookkeeping that travels with a record
// (record.Record.Ticket); it is internal so that no stage can use it.
package ticket

import "sync/atomic"

// A Ticket follows one record read by a source through the graph. Its count
// is the number of places the record (and its fan-out copies) still has to
// be committed; when it reaches zero the record's id is finished and goes
// into the run directory's done log. A record abandoned by a stop never
// reaches zero, so its id is redone by the next run.
type Ticket struct {
	ID string
	N  atomic.Int32
	// Void tickets never finish their id (a duplicate of an earlier record).
	Void atomic.Bool
}
