package sglang

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Stalls: a server that accepts requests and never answers them would hold
// its requests until RequestTimeout (30 min and more), and the end of a run
// with them. A request in flight far beyond the fleet's observed latencies
// is therefore sent once more to another server as a counted attempt with
// a fresh rid; the first answer to arrive wins and the other request is
// cancelled (its rid aborted by the disconnect), so the record still gets
// exactly one completion. The stalled request's server is suspect: it gets
// no new requests until a probe (health and a 1-token generation, bounded
// by the stall threshold) clears it, or ejects it, which cuts its other
// requests short so they are re-sent at once.

// StallFactor: a request has stalled once in flight StallFactor times the
// fleet's p99 latency (and at least StallTimeout).
const StallFactor = 4

// StallMinSamples is how many completions the fleet needs before stalls are
// judged: before that the latencies say nothing.
const StallMinSamples = 20

// flight is one attempt under way.
type flight struct {
	s      *server
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed when res, err are set
	res    *Result
	err    *Error
}

// launch sends req to s in the background.
func (c *Client) launch(ctx context.Context, s *server, req *Request) *flight {
	c.mu.Lock()
	sctx := s.ctx
	c.mu.Unlock()
	fctx, cancel := context.WithCancel(ctx)
	f := &flight{s: s, start: time.Now(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		// Memory: fctx is a child of the run's context until cancelled,
		// and race cancels only the loser; an attempt that ended releases
		// it here, or each of a run's requests would keep its contexts
		// (~400 B) in the parent's children map to the end of the run.
		defer cancel()
		f.res, f.err = c.attempt(fctx, s, sctx, req)
	}()
	return f
}

// updateStallAfter sets the stall threshold from the fleet's recent
// latencies: max(StallTimeout, StallFactor × p99), 0 with too few.
func (c *Client) updateStallAfter() {
	var all []time.Duration
	for _, s := range c.servers {
		s.stats.mu.Lock()
		all = append(all, s.stats.lat...)
		s.stats.mu.Unlock()
	}
	if len(all) < StallMinSamples {
		c.stallAfter.Store(0)
		return
	}
	slices.Sort(all)
	c.stallAfter.Store(int64(max(c.opts.StallTimeout, StallFactor*quantile(all, 0.99))))
}

// stallWait is how long from now until an attempt started elapsed ago
// may count as stalled (re-checked then: the threshold moves).
func (c *Client) stallWait(elapsed time.Duration) time.Duration {
	th := time.Duration(c.stallAfter.Load())
	if th == 0 {
		th = c.opts.StallTimeout
	}
	return max(th-elapsed, 10*time.Millisecond)
}

// race sends req on s, whose slot the session holds. When the attempt
// stalls and canHedge, it is sent once more on another server (hedged);
// the first success wins and the other attempt is cancelled, its slot
// released once it has ended. won is the winner's server, whose slot the
// session holds from then on. When every attempt failed, err is the last
// failure (each recorded against its server) and the session still holds
// s's slot.
func (c *Client) race(ctx context.Context, s *server, req *Request, canHedge bool) (res *Result, won *server, err *Error, hedged bool) {
	r := hedgeRace{c: c, ctx: ctx, req: req, primary: c.launch(ctx, s, req)}
	r.pDone = r.primary.done
	r.stall = time.NewTimer(c.stallWait(0))
	defer r.stall.Stop()
	if canHedge {
		r.stallC = r.stall.C
	}
	for r.pDone != nil || r.hDone != nil {
		select {
		case <-r.pDone:
			r.pDone = nil
			if r.primary.err == nil {
				r.stopSlot()
				if r.hDone != nil {
					c.abandon(r.hedge, r.hDone)
				}
				return r.primary.res, s, nil, r.hedged
			}
			err = r.primary.err
			c.failed(s, err)
		case <-r.hDone:
			r.hDone = nil
			if r.hedge.err == nil {
				c.abandon(r.primary, r.pDone)
				return r.hedge.res, r.hedge.s, nil, r.hedged
			}
			err = r.hedge.err
			c.failed(r.hedge.s, err)
			c.release(r.hedge.s)
		case <-r.stallC:
			r.stalled()
		case h := <-r.slot:
			r.slotCame(h)
		case <-ctx.Done():
			r.cancel()
			return nil, nil, &Error{Class: ClassTransport, Message: context.Cause(ctx).Error(), Server: s.url}, r.hedged
		}
	}
	r.stopSlot()
	return nil, nil, err, r.hedged
}

// hedgeRace is one race's state. pDone and hDone are the attempts' done
// channels, nil once received from (or, for the hedge, before it is
// sent); stallC is nil once a hedge is under way or when none may be;
// slot is the hedge's slot being acquired, nil when none is.
type hedgeRace struct {
	c              *Client
	ctx            context.Context
	req            *Request
	primary, hedge *flight
	pDone, hDone   <-chan struct{}
	stall          *time.Timer
	stallC         <-chan time.Time
	slot           chan *server
	slotCancel     context.CancelFunc
	hedged         bool
}

// stalled handles the stall timer: if the primary has run past the stall
// threshold (which may have risen since the timer was set), it is
// suspect and a slot for a hedge is sought; else the timer waits on.
func (r *hedgeRace) stalled() {
	elapsed := time.Since(r.primary.start)
	if th := time.Duration(r.c.stallAfter.Load()); th == 0 || elapsed < th {
		r.stall.Reset(r.c.stallWait(elapsed))
		return
	}
	r.stallC = nil
	r.c.suspect(r.primary.s, elapsed)
	r.slot, r.slotCancel = r.c.hedgeSlot(r.ctx, r.primary.s)
}

// slotCame sends the hedge on h, the slot hedgeSlot acquired (nil: none).
func (r *hedgeRace) slotCame(h *server) {
	r.slotCancel() // the slot's goroutine is done: release its context
	r.slotCancel, r.slot = nil, nil
	if h == nil {
		return
	}
	r.hedged = true
	r.hedge = r.c.launch(r.ctx, h, r.req)
	r.hDone = r.hedge.done
}

// stopSlot stops acquiring a hedge's slot; a slot acquired meanwhile is
// given back.
func (r *hedgeRace) stopSlot() {
	if r.slotCancel == nil {
		return
	}
	r.slotCancel()
	if h := <-r.slot; h != nil {
		r.c.release(h)
	}
	r.slotCancel = nil
}

// cancel ends the race when its context is done: it cancels both
// attempts and waits for them, releasing the hedge's slot (the session
// keeps the primary's).
func (r *hedgeRace) cancel() {
	r.primary.cancel()
	if r.hedge != nil {
		r.hedge.cancel()
	}
	r.stopSlot()
	if r.pDone != nil {
		<-r.pDone
	}
	if r.hDone != nil {
		<-r.hDone
		r.c.release(r.hedge.s)
	}
}

// hedgeSlot acquires, in the background, a slot on a server other than s
// for a hedge; the channel receives it (nil if none was had before cancel).
func (c *Client) hedgeSlot(ctx context.Context, s *server) (chan *server, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	slot := make(chan *server, 1)
	go func() {
		h, _ := c.acquireSlot(ctx, s, true)
		slot <- h
	}()
	return slot, cancel
}

// abandon cancels the losing attempt f and releases its slot once it has
// ended (done nil: it already has).
func (c *Client) abandon(f *flight, done <-chan struct{}) {
	f.cancel()
	if done == nil {
		c.release(f.s)
		return
	}
	go func() {
		<-done
		c.release(f.s)
	}()
}

// suspect marks s suspect after a request stalled on it for elapsed: a
// warning (once per suspicion), no new requests, and a probe.
func (c *Client) suspect(s *server, elapsed time.Duration) {
	s.stats.stalls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.suspect || !s.admitted {
		return
	}
	s.suspect = true
	th := time.Duration(c.stallAfter.Load())
	c.warnf(WarnStalled, "server %s: a request has been in flight for %v, far beyond the fleet's latencies (stalled after %v: stall_timeout %v, or %d× the p99): sent again to another server; %s gets no new requests until a probe answers",
		s.url, elapsed.Round(time.Millisecond), th, c.opts.StallTimeout, StallFactor, s.url)
	c.probers.Add(1)
	go func() {
		defer c.probers.Done()
		c.probeSuspect(s, th)
	}()
}

// probeSuspect probes a suspect server, bounded by the stall threshold:
// answering clears it, failing ejects it (its requests in flight are then
// re-sent elsewhere).
func (c *Client) probeSuspect(s *server, th time.Duration) {
	ctx, cancel := context.WithTimeout(c.ctx, max(th, c.opts.CheckTimeout))
	defer cancel()
	in := c.check(ctx, s, true)
	if c.ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.suspect {
		return
	}
	s.suspect = false
	c.broadcastLocked()
	if in.State == StateReady && ctx.Err() == nil {
		c.opts.Logf("server %s answers its probe: no longer suspect", s.url)
		return
	}
	reason := in.Reason
	if ctx.Err() != nil {
		reason = fmt.Sprintf("no answer to its probe within %v", max(th, c.opts.CheckTimeout))
	}
	c.ejectLocked(s, "a request stalled and "+reason)
}
