package engine

import (
	"github.com/reugn/go-streams"
	"github.com/reugn/go-streams/extension"
)

// The fabric: how records move between stages. This is the one file that
// knows go-streams; the engine sees a stage's output ports (port) and its
// inlet (a channel it drains until closed).
//
// A port of buffer N (Options.EdgeBuffer, or the kind's
// Spec.PortBuffers) holds at most N records on each edge it feeds, plus
// what the reading stage's workers hold: a record sent through it waits
// nowhere else. go-streams' PassThrough, FanOut and Merge each add a
// goroutine hop that holds one more record (a buffer of 1 held 3), so:
//   - an edge is a buffered channel, seen by the reader as a
//     streams.Outlet (extension.ChanSource, no goroutine);
//   - a port feeding several inputs sends each its own copy itself
//     (port.send), no FanOut goroutine;
//   - a stage with several inputs reads them through merge, whose one
//     goroutine per input holds the record it hands over: such an edge's
//     channel is one smaller, so the edge still holds N.

// port is one connected output port: an edge per input it feeds.
type port struct {
	edges []chan any
}

// queued is how many records wait on the port: on its fullest edge.
func (p *port) queued() int {
	q := 0
	for _, ch := range p.edges {
		q = max(q, len(ch))
	}
	return q
}

func (p *port) close() {
	for _, ch := range p.edges {
		close(ch)
	}
}

// edgeCap is the capacity of an edge of a port of buffer n into a stage
// with inputs inputs (see merge).
func edgeCap(n, inputs int) int {
	n = max(n, 1)
	if inputs > 1 {
		return n - 1
	}
	return n
}

// inlet is what a stage reads: its one edge, or its edges merged in
// arrival order.
func inlet(edges []chan any) <-chan any {
	switch len(edges) {
	case 0:
		return nil
	case 1:
		return extension.NewChanSource(edges[0]).Out()
	}
	outlets := make([]streams.Outlet, len(edges))
	for i, ch := range edges {
		outlets[i] = extension.NewChanSource(ch)
	}
	return merge(outlets...).Out()
}

// merged is the Outlet of merge.
type merged struct{ out chan any }

var _ streams.Outlet = (*merged)(nil)

func (m *merged) Out() <-chan any { return m.out }

// merge is flow.Merge without its PassThrough: each input's goroutine
// sends straight to the unbuffered output, so it holds at most the one
// record it is handing over. The output closes once every input has.
//
//	in1 -- 1 ------- 3 ---|
//	in2 ------ 2 ------ 4 --|
//	out -- 1 -- 2 -- 3 - 4 --|
func merge(outlets ...streams.Outlet) streams.Outlet {
	m := &merged{out: make(chan any)}
	left := make(chan struct{}, len(outlets))
	for _, o := range outlets {
		go func() {
			for v := range o.Out() {
				m.out <- v
			}
			left <- struct{}{}
		}()
	}
	go func() {
		for range outlets {
			<-left
		}
		close(m.out)
	}()
	return m
}
