package pipeline

import (
	"context"
	"fmt"
	"reflect"

	"github.com/pipe-dev/pipe/pipeline/output"
)

// Constructor builds a kind's stage from its decoded, validated config.
// NewSource and NewProcessor make one; the config type C they are
// instantiated with is the kind's config struct (Spec.Config is set from it)
// and which of the two is called says whether the kind is a source
// (Spec.Source). The function must have no side effects: resources are
// acquired in Open. pipe check calls it, so a config only the constructor
// can judge is reported there, at the stage's position.
type Constructor struct {
	config    reflect.Type // C
	source    func(config any) (Source, error)
	processor func(config any) (Processor, error)
}

// NewSource is the Constructor of a source kind with config type C.
func NewSource[C any](f func(*C) (Source, error)) Constructor {
	return Constructor{config: typeOf[C](), source: func(c any) (Source, error) {
		cfg, err := configOf[C](c)
		if err != nil {
			return nil, err
		}
		return f(cfg)
	}}
}

// NewProcessor is the Constructor of a processor (or sink) kind with
// config type C.
func NewProcessor[C any](f func(*C) (Processor, error)) Constructor {
	return Constructor{config: typeOf[C](), processor: func(c any) (Processor, error) {
		cfg, err := configOf[C](c)
		if err != nil {
			return nil, err
		}
		return f(cfg)
	}}
}

// FieldsFor types a Spec.Fields refinement by the kind's config type.
func FieldsFor[C any](f func(*C) (needs, produces []string)) func(config any) (needs, produces []string) {
	return func(c any) ([]string, []string) { return f(mustConfig[C](c)) }
}

// SettingsFor types a Spec.KeySettings summary by the kind's config type.
func SettingsFor[C any](f func(*C) string) func(config any) string {
	return func(c any) string { return f(mustConfig[C](c)) }
}

// PublishFor types a Spec.Publish by the kind's config type.
func PublishFor[C any](f func(context.Context, *C, *output.PublishEnv) error) output.PublishFunc {
	return func(ctx context.Context, c any, env *output.PublishEnv) error {
		cfg, err := configOf[C](c)
		if err != nil {
			return err
		}
		return f(ctx, cfg, env)
	}
}

// VerifyFor types a Spec.Verify by the kind's config type.
func VerifyFor[C any](f func(context.Context, *C, *output.VerifyEnv) (*output.Verified, error)) output.VerifyFunc {
	return func(ctx context.Context, c any, env *output.VerifyEnv) (*output.Verified, error) {
		cfg, err := configOf[C](c)
		if err != nil {
			return nil, err
		}
		return f(ctx, cfg, env)
	}
}

func typeOf[C any]() reflect.Type { return reflect.TypeFor[C]() }

// configOf is the one place a decoded config (any) becomes the kind's type.
func configOf[C any](c any) (*C, error) {
	cfg, ok := c.(*C)
	if !ok {
		return nil, fmt.Errorf("config is %T, want *%s (a hook typed for another kind)", c, typeOf[C]())
	}
	return cfg, nil
}

// mustConfig is configOf for hooks that cannot return an error: a hook
// typed for another kind is a programming error, found by any test that
// checks the kind's example.
func mustConfig[C any](c any) *C {
	cfg, err := configOf[C](c)
	if err != nil {
		panic("pipeline: " + err.Error())
	}
	return cfg
}

// IsSource reports whether the kind takes no input (NewSource).
func (c Constructor) IsSource() bool { return c.source != nil }

// Source builds a source kind's stage.
func (c Constructor) Source(config any) (Source, error) {
	if c.source == nil {
		return nil, fmt.Errorf("not a source kind")
	}
	return c.source(config)
}

// Processor builds a processor kind's stage.
func (c Constructor) Processor(config any) (Processor, error) {
	if c.processor == nil {
		return nil, fmt.Errorf("not a processor kind")
	}
	return c.processor(config)
}

// Stage builds the stage whatever its kind: the Source or the Processor,
// for looking up the optional interfaces it implements (Opener,
// InputChecker, ...).
func (c Constructor) Stage(config any) (any, error) {
	if c.source != nil {
		return c.source(config)
	}
	if c.processor != nil {
		return c.processor(config)
	}
	return nil, fmt.Errorf("no constructor")
}
