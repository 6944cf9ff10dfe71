package stages

import (
	"errors"
	"io/fs"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// A model directory's tokenizer, as the stages that name one (generate,
// validate-thinking, tokenize-and-mask) check and load it.

// checkTokenizer is `pipe check`'s look at a tokenizer key's directory:
// the components tokenize.Load would refuse, reported at the key (a missing
// tokenizer.json is the path check's to report).
func checkTokenizer(key, dir string) []error {
	if dir == "" {
		return nil
	}
	if err := tokenize.CheckFile(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return []error{&config.FieldError{Key: key, Msg: err.Error()}}
	}
	return nil
}

// sharedTokenizer loads the tokenizer in dir once per run: stages that name
// the same directory share one (it is safe for concurrent use).
func sharedTokenizer(env *pipeline.Env, dir string) (*tokenize.Tokenizer, error) {
	if env == nil || env.Resources == nil {
		return tokenize.Load(dir)
	}
	v, err := env.Resources.Get("tokenizer:"+dir, func() (any, func() error, error) {
		tok, err := tokenize.Load(dir)
		return tok, nil, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*tokenize.Tokenizer), nil
}
