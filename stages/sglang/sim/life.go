package sim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// life is one run of a server, from listen (start or revival) to kill. A
// revived server gets a new life: fresh queue, counters and warm-up, as a
// restarted process would.
type life struct {
	s       *Server
	cfg     *Config
	srv     *http.Server
	ln      net.Listener
	started time.Time
	dead    chan struct{} // closed by kill: wakes every waiting handler
	served  chan struct{} // closed when Serve has returned

	mu      sync.Mutex
	killed  bool
	active  sync.WaitGroup // handlers running; Add only while !killed
	rids    map[string]struct{}
	ridSeed uint64

	adm admission
	seq atomic.Uint64 // requests seen, for fault draws and default rids

	requests, promptTokens, genTokens atomic.Int64
	// completed counts whole 200 answers to generation requests (not
	// SGLang's: for tests that bound how much work a client had redone).
	completed atomic.Int64
	kvTokens  atomic.Int64 // prompt + generated tokens of running requests
	// kvMu serializes retraction decisions; retracted counts them
	// (num_retracted_requests_total), retractedNow the retracted requests
	// waiting to run again (num_retracted_reqs).
	kvMu                    sync.Mutex
	retracted, retractedNow atomic.Int64
	// ttft is the requests' time to first token (queue and prefill), in
	// simulated seconds, as SGLang's --enable-metrics histogram.
	ttft histogram
}

func newLife(s *Server, ln net.Listener) *life {
	l := &life{
		s: s, cfg: &s.fleet.cfg, ln: ln, started: time.Now(),
		dead: make(chan struct{}), served: make(chan struct{}),
		rids: make(map[string]struct{}),
	}
	l.ridSeed = mix(s.fleet.cfg.Seed, uint64(s.index), uint64(l.started.UnixNano()))
	l.adm.init(s.fleet.cfg.MaxRunning, s.fleet.cfg.MaxQueued, &l.kvTokens, l.kvCapacity(), l.cfg)
	l.srv = httpServer(l)
	return l
}

func (l *life) serve() {
	defer close(l.served)
	_ = l.srv.Serve(l.ln) // returns ErrServerClosed on kill
}

// kill closes the listener and every connection, wakes every handler and
// waits until they and Serve have returned.
func (l *life) kill() {
	l.mu.Lock()
	l.killed = true
	l.mu.Unlock()
	_ = l.srv.Close() // first, so that no handler woken below can still answer
	close(l.dead)
	<-l.served
	l.active.Wait()
}

// enter registers a handler; false means the life is over.
func (l *life) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.killed {
		return false
	}
	l.active.Add(1)
	return true
}

// warming reports whether the server is still in its warm-up.
func (l *life) warming() bool {
	return l.cfg.WarmUp > 0 && time.Since(l.started) < l.cfg.wall(l.cfg.WarmUp)
}

var errKilled = errors.New("server killed")

// sleep waits d of wall time, or until ctx is done or the server is killed.
func (l *life) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.dead:
		return errKilled
	}
}

// Sleeps shorter than minSleep are skipped (the work counts as done at once):
// at high Speed a timer per tiny step would cost more than the step.
const (
	minSleep = 50 * time.Microsecond
	quantum  = 50 * time.Millisecond // the decode speed is re-read this often (wall)
	// streamQuantum is the frame interval of a stream (SGLang streams every
	// token; at 60 tokens/s that is every 17 ms).
	streamQuantum = 20 * time.Millisecond
)

// rate is each running request's decode speed in simulated tokens/s.
func (l *life) rate() float64 {
	n, _ := l.adm.counts()
	r := l.cfg.decodeRate(n)
	if l.s != nil && slowed(l.cfg.Faults, l.s.index, l.seq.Load(), l.s.fleet.now()) {
		r /= slowFactor
	}
	return r
}

// decodeRate is each request's decode speed with n running, in simulated
// tokens/s: also the batch's decode steps per simulated second (each step
// gives every running request one token).
func (c *Config) decodeRate(n int) float64 {
	return c.DecodeTokensPerSec / (1 + float64(max(n, 1)-1)/c.BatchHalfSpeed)
}

// prefill waits out the time to first token for a prompt. It returns when
// prefill was due to end, so that decode credits a late timer wake-up (a
// loaded machine wakes timers late) instead of losing it.
func (l *life) prefill(ctx context.Context, promptTokens int) (time.Time, error) {
	start := time.Now()
	d := l.cfg.PrefillLatency + time.Duration(float64(promptTokens)/l.cfg.PrefillTokensPerSec*float64(time.Second))
	d = l.cfg.wall(d)
	if d < minSleep {
		return start, nil
	}
	return start.Add(d), l.sleep(ctx, d)
}

// errRetracted ends a decode whose request was retracted (retractLocked).
var errRetracted = errors.New("retracted")

// retract decides whether a request that decoded reported tokens gives
// way: when the running requests' tokens exceed the KV cache (KVTokens) and
// others run, it leaves the cache (its tokens are taken out here, under
// kvMu, so that one retraction at a time relieves the pressure), as
// SGLang's scheduler retracts decoding requests when the cache runs out
// (managers/scheduler.py, retract_decode). The request is then admitted
// again only when it fits (admission), with new_token_ratio raised.
func (l *life) retract(reported int) bool {
	if l.kvTokens.Load() <= int64(l.kvCapacity()) {
		return false
	}
	l.kvMu.Lock()
	defer l.kvMu.Unlock()
	if running, _ := l.adm.counts(); running <= 1 || l.kvTokens.Load() <= int64(l.kvCapacity()) {
		return false
	}
	l.kvTokens.Add(-int64(reported))
	l.retracted.Add(1)
	return true
}

// retractChecked is retract, noting the check's time in *checked.
func (l *life) retractChecked(checked *time.Time, now time.Time, reported int) bool {
	*checked = now
	return l.retract(reported)
}

// decode waits out the decoding of n tokens at the batch-dependent speed,
// counting from the instant from (the end of prefill), and calls progress
// (if not nil) with the tokens done so far whenever that grows; a progress
// error stops decoding. Decoded tokens count in kvTokens until decode
// returns. It is never retracted (a health check's one token); requests
// decode with decodeAll.
func (l *life) decode(ctx context.Context, n int, from time.Time, progress func(done int) error) error {
	_, err := l.decodeN(ctx, n, from, progress, nil)
	return err
}

// decodeN is decode for the request holding t (nil: a health check):
// each decoded token shrinks t's reservation (admission.decoded), and the
// request may be retracted when the KV cache is full: it then returns the
// tokens it decoded and errRetracted.
func (l *life) decodeN(ctx context.Context, n int, from time.Time, progress func(done int) error, t *ticket) (int, error) {
	retractable := t != nil
	done := 0.0
	reported := 0
	defer func() { l.kvTokens.Add(-int64(reported)) }() // the request leaves the KV cache
	last := from
	var checked time.Time // the last retraction check
	q := quantum
	if progress != nil {
		q = streamQuantum
	}
	for {
		r := l.rate() * l.cfg.Speed // tokens per wall second
		now := time.Now()
		done = min(done+now.Sub(last).Seconds()*r, float64(n))
		last = now
		if d := int(done); d > reported {
			l.genTokens.Add(int64(d - reported))
			l.kvTokens.Add(int64(d - reported))
			if t != nil {
				l.adm.decoded(t, d-reported)
			}
			reported = d
			if progress != nil {
				if err := progress(d); err != nil {
					return reported, err
				}
			}
		}
		if reported >= n {
			return reported, nil
		}
		// The cache is checked about once per quantum, however often a
		// stream's frames go: streaming makes a request no likelier to
		// be retracted.
		if retractable && now.Sub(checked) >= quantum*9/10 && l.retractChecked(&checked, now, reported) {
			done := reported
			reported = 0 // taken out of kvTokens by retract
			return done, errRetracted
		}
		remain := time.Duration((float64(n) - done) / r * float64(time.Second))
		if remain < minSleep {
			done = float64(n) // not worth a timer: finish on the next turn
			last = time.Now()
			continue
		}
		if err := l.sleep(ctx, min(remain, q)); err != nil {
			return reported, err
		}
	}
}

// admission is the running batch and its FIFO queue. A waiting request is
// admitted when a running slot is free (max_running_requests) and, as
// SGLang's scheduler admits from its waiting queue
// (managers/scheduler.py get_new_batch_prefill, which stops at the first
// request managers/schedule_policy.py PrefillAdder.add_one_req answers
// NO_TOKEN), when its prompt and the tokens it may still decode
// (max_new_tokens less its output so far, clipped at
// CLIP_MAX_NEW_TOKENS_ESTIMATION) fit in the KV cache beyond what the
// running requests hold and the decode tokens reserved for them: each
// running request reserves its remaining max_new_tokens (clipped) times
// new_token_ratio (PrefillAdder._get_running_request_total_token_offset).
// That ratio starts at 0.7, falls by (0.7 - 0.098)/600 per decode step of
// the batch to 0.098 (scheduler.py update_running_batch;
// SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14,
// SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS), and a retraction sets it to
// (decoded + 20 × running) / (Σ max_new_tokens + 1) of the requests still
// running (schedule_batch.py retract_decode, SGLANG_RETRACT_DECODE_STEPS):
// after a retraction the server admits conservatively, so a retracted
// request waits until its prompt and output so far fit, instead of
// pushing the cache over again. A lone request is always admitted (SGLang
// clips max_new_tokens to what an empty cache holds).
type admission struct {
	mu         sync.Mutex
	running    int
	maxRunning int
	maxQueued  int // < 0: unbounded
	queue      []*waiter

	// kv is the life's count of the tokens running requests hold, which
	// admission adds each admitted ticket's prompt to (and takes it out on
	// release); kvCap is the cache's size; cfg gives the decode speed.
	kv    *atomic.Int64
	kvCap int
	cfg   *Config
	// reserved is Σ ticket.reserved of the running; decodedSum and
	// maxNewSum their output so far and max_new_tokens (for the ratio
	// after a retraction); ratio is new_token_ratio as of ratioAt.
	reserved, decodedSum, maxNewSum int
	ratio                           float64
	ratioAt                         time.Time
}

// SGLang's scheduler constants (see admission).
const (
	clipMaxNewTokens   = 4096 // SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
	initNewTokenRatio  = 0.7  // SGLANG_INIT_NEW_TOKEN_RATIO
	minNewTokenRatio   = initNewTokenRatio * 0.14
	newTokenRatioSteps = 600 // SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
	retractDecodeSteps = 20  // SGLANG_RETRACT_DECODE_STEPS
)

// ticket is one request's claim on the KV cache, from its admission to its
// release; the fields are guarded by admission.mu once it is queued.
type ticket struct {
	prompt  int // tokens it brings into the cache when admitted: prompt (+ output so far, re-admitted)
	left    int // tokens it may still decode (max_new_tokens, clipped as SGLang does, less its output)
	maxNew  int // its max_new_tokens (clipped)
	decoded int // its output so far
	// reserved is min(left, clipMaxNewTokens) while it runs, its part of
	// admission.reserved.
	reserved int
}

// newTicket is the claim of a request of prompt tokens asking for maxNew,
// whose max_new_tokens SGLang clips so that prompt and output fit in an
// empty cache (scheduler.py: max_req_len - input - 1, max_req_len below
// max_total_num_tokens).
func newTicket(prompt, maxNew, kvCap int) *ticket {
	maxNew = max(0, min(maxNew, kvCap-prompt-2))
	return &ticket{prompt: prompt, left: maxNew, maxNew: maxNew}
}

type waiter struct {
	t       *ticket
	ready   chan struct{}
	granted bool // set under mu when a slot is handed over
}

//lint:ignore ST1005 SGLang's own message, word for word, as its clients see it
var errQueueFull = errors.New("The request queue is full.")

func (a *admission) init(maxRunning, maxQueued int, kv *atomic.Int64, kvCap int, cfg *Config) {
	a.maxRunning, a.maxQueued = maxRunning, maxQueued
	a.kv, a.kvCap, a.cfg = kv, kvCap, cfg
	a.ratio, a.ratioAt = initNewTokenRatio, time.Now()
}

func (a *admission) counts() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running, len(a.queue)
}

// decayLocked brings ratio up to now: one decay per decode step, of which
// the batch runs decodeRate(running) per simulated second while it runs.
func (a *admission) decayLocked(now time.Time) {
	if a.running > 0 && a.cfg != nil {
		steps := now.Sub(a.ratioAt).Seconds() * a.cfg.Speed * a.cfg.decodeRate(a.running)
		a.ratio = max(minNewTokenRatio, a.ratio-steps*(initNewTokenRatio-minNewTokenRatio)/newTokenRatioSteps)
	}
	a.ratioAt = now
}

// fitsLocked reports whether t may be admitted now.
func (a *admission) fitsLocked(t *ticket) bool {
	if a.running >= a.maxRunning {
		return false
	}
	if a.running == 0 || a.kv == nil {
		return true
	}
	a.decayLocked(time.Now())
	free := float64(a.kvCap) - float64(a.kv.Load()) - a.ratio*float64(a.reserved)
	return float64(t.prompt+min(t.left, clipMaxNewTokens)) <= free
}

// grantLocked makes t a running request.
func (a *admission) grantLocked(t *ticket) {
	a.decayLocked(time.Now())
	a.running++
	t.reserved = min(t.left, clipMaxNewTokens)
	a.reserved += t.reserved
	a.decodedSum += t.decoded
	a.maxNewSum += t.maxNew
	if a.kv != nil {
		a.kv.Add(int64(t.prompt))
	}
}

// acquire takes a running slot for t, waiting in FIFO order; it fails with
// errQueueFull when the queue is at its limit, or when ctx is done or dead is
// closed while waiting. A nil error must be paired with release(t).
func (a *admission) acquire(ctx context.Context, dead <-chan struct{}, t *ticket) error {
	a.mu.Lock()
	if len(a.queue) == 0 && a.fitsLocked(t) {
		a.grantLocked(t)
		a.mu.Unlock()
		return nil
	}
	if a.maxQueued >= 0 && len(a.queue) >= a.maxQueued {
		a.mu.Unlock()
		return errQueueFull
	}
	w := &waiter{t: t, ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	a.mu.Unlock()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-dead:
		err = errKilled
	}
	a.mu.Lock()
	if w.granted {
		a.mu.Unlock()
		a.release(t)
		return err
	}
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	a.admitLocked() // the head may have changed
	a.mu.Unlock()
	return err
}

// decoded notes that t's request decoded n more tokens: its reservation
// shrinks once what it may still decode is below the clip.
func (a *admission) decoded(t *ticket, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t.decoded += n
	a.decodedSum += n
	t.left = max(0, t.left-n)
	r := min(t.left, clipMaxNewTokens)
	a.reserved -= t.reserved - r
	t.reserved = r
}

// release frees t's slot and its tokens in the cache, then admits the
// waiters at the head of the queue that now fit.
func (a *admission) release(t *ticket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(t)
	a.admitLocked()
}

// retracted is release for a request the cache ran out for: new_token_ratio
// becomes that of the requests still running (see admission).
func (a *admission) retracted(t *ticket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(t)
	// Below the floor it comes back to the floor at the next decode step
	// (update_running_batch's max with min_new_token_ratio).
	a.ratio = max(minNewTokenRatio, min(1, float64(a.decodedSum+retractDecodeSteps*a.running)/float64(a.maxNewSum+1)))
	a.ratioAt = time.Now()
	a.admitLocked()
}

func (a *admission) releaseLocked(t *ticket) {
	a.decayLocked(time.Now())
	a.running--
	a.reserved -= t.reserved
	a.decodedSum -= t.decoded
	a.maxNewSum -= t.maxNew
	t.reserved = 0
	if a.kv != nil {
		a.kv.Add(-int64(t.prompt))
	}
}

// admitLocked hands free slots to the waiters at the head of the queue, in
// order, while they fit.
func (a *admission) admitLocked() {
	for len(a.queue) > 0 && a.fitsLocked(a.queue[0].t) {
		w := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.grantLocked(w.t)
		w.granted = true
		close(w.ready)
	}
}

// decodeAll decodes res.n tokens of a request from decodeFrom (the end of
// its prefill), calling progress (if not nil) with the tokens done so far,
// streamed or not. A request retracted (retract: the KV cache ran out)
// leaves the batch and the cache, waits for a running slot again,
// prefills its prompt and what it had decoded (SGLang keeps the output so
// far: managers/scheduler.py retract_decode, then the request re-enters
// the waiting queue), and decodes on from there; res.retractions counts
// it, and a stream's frames simply pause meanwhile. *held says whether the
// request holds a running slot (the caller releases it).
func (l *life) decodeAll(ctx context.Context, res *result, decodeFrom time.Time, progress func(done int) error, held *bool) error {
	t := res.ticket
	done := 0 // decoded so far
	for {
		p := progress
		if progress != nil {
			base := done
			p = func(d int) error { return progress(base + d) }
		}
		d, err := l.decodeN(ctx, res.n-done, decodeFrom, p, t)
		if !errors.Is(err, errRetracted) {
			return err
		}
		done += d
		res.retractions++
		// The prompt and the output so far leave the cache with the
		// slot, and come back as the prompt it is admitted with again.
		*held = false
		l.adm.retracted(t)
		t.prompt = res.job.promptTokens + done
		l.retractedNow.Add(1)
		err = l.adm.acquire(ctx, l.dead, t)
		l.retractedNow.Add(-1)
		if err != nil {
			return err
		}
		*held = true
		if decodeFrom, err = l.prefill(ctx, t.prompt); err != nil {
			return err
		}
	}
}
