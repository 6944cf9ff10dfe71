package pipeline

import (
	"errors"
	"sync"
)

// Resources holds things several stages of one run share, created on first
// use and closed when the run ends (e.g. an in-process simulator fleet).
type Resources struct {
	mu     sync.Mutex
	items  map[string]any
	closes []func() error
}

// NewResources returns an empty set; the engine makes one per run.
func NewResources() *Resources { return &Resources{items: map[string]any{}} }

// Get returns the resource under key, creating it with create on first use.
// close, if not nil, is called by Close in reverse order of creation.
func (r *Resources) Get(key string, create func() (any, func() error, error)) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.items[key]; ok {
		return v, nil
	}
	v, closeFn, err := create()
	if err != nil {
		return nil, err
	}
	r.items[key] = v
	if closeFn != nil {
		r.closes = append(r.closes, closeFn)
	}
	return v, nil
}

// Set stores a resource created outside the run (e.g. by `pipe run --sim`).
func (r *Resources) Set(key string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items[key] = v
}

// Close closes every resource created through Get, newest first.
func (r *Resources) Close() error {
	r.mu.Lock()
	closes := r.closes
	r.closes = nil
	r.mu.Unlock()
	var errs []error
	for i := len(closes) - 1; i >= 0; i-- {
		errs = append(errs, closes[i]())
	}
	return errors.Join(errs...)
}
