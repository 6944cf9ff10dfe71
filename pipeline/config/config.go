// Package config is what a stage kind's config struct may use and
// implement beyond plain fields (whose struct tags pipeline.Spec's Config
// describes): durations, fields with a shape of their own, checks across
// fields and errors that name a key.
package config

import "time"

// Duration is a config value written as a Go duration string ("90s", "10m").
type Duration struct{ time.Duration }

// Decoder is implemented (on the pointer) by config field types with a
// shape of their own, e.g. a list of servers given as strings or tables. raw
// is what TOML decoded: string, int64, float64, bool, []any, map[string]any.
// An error joining several (errors.Join), e.g. one per bad item of a list,
// is reported as one problem each.
type Decoder interface {
	DecodeConfig(raw any) error
}

// TypeNamer is implemented by Decoder types to name their shape in
// documentation and messages, e.g. "array of URLs or tables".
type TypeNamer interface {
	ConfigTypeName() string
}

// Validator is implemented by config structs with checks across fields. Each
// returned error is reported as a problem at the stage's position; a
// FieldError names the key so the position is the key's.
type Validator interface {
	Validate() []error
}

// DirResolver is a key's value that names something relative to the
// pipeline file's directory without being a path (exec's command: its
// program runs there). After decoding it, pipe calls ResolveDir with that
// directory (the working directory for a value given by --set).
type DirResolver interface {
	ResolveDir(dir string)
}

// TrainerUser is implemented by a config whose keys tagged
// `trainer:"KEY"` take the [trainer] table's values only in some of its
// settings (a writer's trainer layouts, not its plain records): with the
// keys the stage sets decoded, UsesTrainer says whether they apply. A
// config without it always takes them.
type TrainerUser interface {
	UsesTrainer() bool
}

// TrainerDefaulter is implemented by a config with a default that depends
// on whether the pipeline file declares [trainer] (a row longer than the
// trainer's max_length is cut as the trainer cuts it; without one, it is
// refused): with the stage's keys decoded and [trainer]'s applied,
// TrainerDefaults is told whether it is declared, before Validate.
type TrainerDefaulter interface {
	TrainerDefaults(declared bool)
}

// FieldError is a problem with one config key.
type FieldError struct {
	Key string
	Msg string
	// Item, when above 0, is the item (from 1) of the key's array the
	// problem is in: it is shown where the file writes that item.
	Item int
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }
