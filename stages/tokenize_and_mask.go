package stages

import (
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

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
