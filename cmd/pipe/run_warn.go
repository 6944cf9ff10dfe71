package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/view"
	"github.com/pipe-dev/pipe/stages"
)

// runWarning is something a user must act on, shown on the terminal, in
// the run log and in status.json (rundir.Warning).
type runWarning = rundir.Warning

// warnLimits are the thresholds of the warnings (pipe run's --warn-* flags).
type warnLimits struct {
	// RejectShare and TinyShare: of what a stage finished, and of the
	// answers generated, since the start or over the last minute.
	RejectShare, TinyShare float64
	// FailShare is the share of failed records over the last minute.
	FailShare float64
	// MinFree is the free disk space below which the run's disks warn.
	MinFree int64
}

// warnMinSample is how many records a share needs before it is judged,
// since the start and over the last minute alike: a few unlucky first
// answers of a resume (often the hard prompts an earlier run left) are no
// trend. Past it, the share must also be over the limit with 95%
// confidence (warnConfident), so 22 of 100 is no warning at a 20% limit.
const warnMinSample = 100

// warnZ is the normal quantile of the one-sided 95% bound of a share.
const warnZ = 1.645

// warnConfident reports whether part of whole is evidence that the true
// share is at least limit: whole >= warnMinSample and the lower Wilson
// score bound of part/whole (one-sided, 95%) reaches limit. Wilson's
// interval, unlike the normal approximation, stays inside [0, 1] and is
// sound for shares near 0 or 1, which is where warnings live.
func warnConfident(part, whole, limit float64) bool {
	if whole < warnMinSample || part <= 0 {
		return false
	}
	p, z2 := part/whole, warnZ*warnZ
	lower := (p + z2/(2*whole) - warnZ*math.Sqrt(p*(1-p)/whole+z2/(4*whole*whole))) / (1 + z2/whole)
	return lower >= limit
}

// warner watches a run's snapshots and says what changed for the worse.
// A condition warns when it starts and again only after it has cleared
// (dropped below half its threshold), so a lasting problem is one line,
// not one a second.
type warner struct {
	limits warnLimits
	// dirs are the run directory and output directories whose disks are
	// watched.
	dirs    []string
	statfs  func(dir string) (free, total int64, err error)
	active  map[string]bool
	servers map[string]liveServer
	all     []runWarning
	// diskEvery: the disks are checked at most this often.
	diskEvery time.Duration
	diskAt    time.Duration
	emit      func(runWarning)
	// mu guards all and emit's calls: the stages warn from their own
	// goroutines (engine.Options.Warn), check from the progress loop.
	mu sync.Mutex
}

func newWarner(limits warnLimits, dirs []string, emit func(runWarning)) *warner {
	return &warner{limits: limits, dirs: dirs, statfs: statfsFree, active: map[string]bool{},
		servers: map[string]liveServer{}, diskEvery: 30 * time.Second, diskAt: -time.Hour, emit: emit}
}

// recent returns the last warnings, for status.json.
func (w *warner) recent() []runWarning {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.all[max(0, len(w.all)-20):])
}

func (w *warner) warn(elapsed time.Duration, kind, format string, args ...any) {
	rw := runWarning{At: time.Now().UTC().Format(time.RFC3339), ElapsedS: elapsed.Seconds(), Kind: kind, Text: fmt.Sprintf(format, args...)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, rw)
	w.emit(rw)
}

// condition warns once when on becomes true, and re-arms once off.
func (w *warner) condition(key string, on, off bool, warn func()) {
	switch {
	case on && !w.active[key]:
		w.active[key] = true
		warn()
	case off && w.active[key]:
		w.active[key] = false
	}
}

// check judges one snapshot.
func (w *warner) check(l *live, ls *liveStatus) {
	elapsed := time.Duration(ls.ElapsedS * float64(time.Second))
	if f := ls.Fleet; f != nil {
		for _, s := range f.Servers {
			prev, seen := w.servers[s.Name]
			w.servers[s.Name] = s
			switch {
			case !seen:
			case s.Ejections > prev.Ejections && s.State == view.ServerEjected:
				w.warn(elapsed, "server_ejected", "server %s ejected: %s; its requests go to the other servers while it is probed", s.Name, s.Reason)
			case s.Ejections > prev.Ejections:
				w.warn(elapsed, "server_ejected", "server %s was ejected and re-admitted since the last check", s.Name)
			case prev.State == view.ServerEjected && s.State == view.ServerReady:
				// Not a server that was still loading (probing → ready).
				w.warn(elapsed, "server_readmitted", "server %s re-admitted: ready again", s.Name)
			}
		}
		w.shares(elapsed, l, "tiny_answers", w.limits.TinyShare,
			func(m sample) (float64, float64) { return m.tiny, m.answers },
			func(when string, share float64, n, of int64) string {
				return fmt.Sprintf("%s of answers %s are tiny (under %d characters; %d of %d): check the servers and the prompts (pipe inspect the output)",
					pct(share), when, stages.TinyAnswerRunes, n, of)
			})
	}
	for i, st := range ls.Stages {
		i := i
		w.shares(elapsed, l, "rejects:"+st.ID, w.limits.RejectShare,
			func(m sample) (float64, float64) {
				s := stageOf(m, i)
				return float64(s.Rejected), float64(done(s))
			},
			func(when string, share float64, n, of int64) string {
				text := fmt.Sprintf("stage %s rejected %s of records %s (%d of %d)", st.ID, pct(share), when, n, of)
				if r := topReasons(st, 3); r != "" {
					text += "; overall: " + r
				}
				return text
			})
		from, to, ok := l.since(window1m)
		if !ok {
			continue
		}
		a, b := stageOf(from, i), stageOf(to, i)
		failed, finished := b.Failed-a.Failed, done(b)-done(a)
		share := 0.0
		if finished > 0 {
			share = float64(failed) / float64(finished)
		}
		on := w.limits.FailShare > 0 && warnConfident(float64(failed), float64(finished), w.limits.FailShare)
		w.condition("failures:"+st.ID, on, share < w.limits.FailShare/2, func() {
			// Servers only where the stage has them.
			cause := "its rules, its program or its inputs may be failing (its first errors are in run.log)"
			if st.Expensive {
				cause = "its servers or inputs may be failing"
			}
			w.warn(elapsed, "failures", "stage %s failed %s of records in the last minute (%d of %d; kept in RUN_DIR/failed): %s",
				st.ID, pct(share), failed, finished, cause)
		})
	}
	if elapsed-w.diskAt >= w.diskEvery {
		w.diskAt = elapsed
		w.disks(elapsed)
	}
}

// shares warns when part/whole crosses limit since the start (the first
// minutes of a run) or over the last minute (any later window).
func (w *warner) shares(elapsed time.Duration, l *live, key string, limit float64, pick func(sample) (part, whole float64), text func(when string, share float64, n, of int64) string) {
	if limit <= 0 || len(l.hist) == 0 {
		return
	}
	last := l.hist[len(l.hist)-1]
	judge := func(part, whole float64) (on, off bool, share float64) {
		if whole <= 0 {
			return false, false, 0
		}
		share = part / whole
		return warnConfident(part, whole, limit), share < limit/2, share
	}
	p, t := pick(last)
	on, off, share := judge(p, t)
	when := "so far"
	n, of := int64(p), int64(t)
	if from, to, ok := l.since(window1m); ok && from.at > 0 {
		p0, t0 := pick(from)
		p1, t1 := pick(to)
		if won, woff, wshare := judge(p1-p0, t1-t0); won && !on {
			on, off, share, when, n, of = won, woff, wshare, "in the last minute", int64(p1-p0), int64(t1-t0)
		} else {
			off = off && woff
		}
	}
	w.condition(key, on, off, func() { w.warn(elapsed, kindOf(key), "%s", text(when, share, n, of)) })
}

func kindOf(key string) string {
	for i := range key {
		if key[i] == ':' {
			return key[:i]
		}
	}
	return key
}

// disks warns for each watched directory whose disk has less than MinFree
// free and is more than half used (a small disk that is mostly free is
// not filling), or has under 2% of its size free.
func (w *warner) disks(elapsed time.Duration) {
	if w.limits.MinFree <= 0 {
		return
	}
	for _, d := range w.dirs {
		free, total, err := w.statfs(d)
		if err != nil || total == 0 {
			continue
		}
		low := free < w.limits.MinFree && float64(free) < 0.5*float64(total) || float64(free) < 0.02*float64(total)
		ok := free >= 2*w.limits.MinFree && float64(free) >= 0.04*float64(total)
		w.condition("disk:"+d, low, ok, func() {
			w.warn(elapsed, "disk", "disk of %s is filling: %s free of %s; the run fails when it is full (what is committed is kept)",
				pipeline.DisplayPath(d), numfmt.Bytes(free), numfmt.Bytes(total))
		})
	}
}

// statfsFree is the free (to this user) and total bytes of dir's disk, or
// of its nearest existing parent.
func statfsFree(dir string) (free, total int64, err error) {
	for {
		var st unix.Statfs_t
		err = unix.Statfs(dir, &st)
		if err == nil {
			return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return 0, 0, err
		}
		dir = parent
	}
}

// shareFlag is a share given as 0.2 or 20%.
type shareFlag float64

func (s *shareFlag) String() string { return pct(float64(*s)) }

func (s *shareFlag) Set(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err == nil && strings.HasSuffix(v, "%") {
		f /= 100
	}
	if err != nil || f < 0 || f > 1 {
		return fmt.Errorf("want a share: 0..1 or 0%%..100%%, got %q", v)
	}
	*s = shareFlag(f)
	return nil
}
