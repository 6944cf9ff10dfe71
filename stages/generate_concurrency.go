package stages

import (
	"fmt"
	"strconv"
	"strings"
)

// concurrencySetting is the concurrency key: a number of requests in flight
// per server (fixed), or "auto": each server's limit adapts to what it can
// run, from the load it reports, up to max_concurrency (see
// stages/sglang/adapt.go).
type concurrencySetting struct {
	N    int
	Auto bool
}

// maxConcurrencySetting bounds a fixed concurrency.
const maxConcurrencySetting = 4096

func (c *concurrencySetting) ConfigTypeName() string { return `integer or "auto"` }

func (c *concurrencySetting) DecodeConfig(raw any) error {
	var n int64
	switch x := raw.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case string:
		s := strings.TrimSpace(x)
		if s == "auto" {
			*c = concurrencySetting{Auto: true}
			return nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf(`must be 1..%d or "auto", got %q`, maxConcurrencySetting, x)
		}
		n = v
	default:
		return fmt.Errorf(`must be 1..%d or "auto", got %v`, maxConcurrencySetting, raw)
	}
	// Kept even when out of range: pipe graph draws the file as written.
	*c = concurrencySetting{N: int(n)}
	if n < 1 || n > maxConcurrencySetting {
		return fmt.Errorf(`must be 1..%d or "auto", got %d`, maxConcurrencySetting, n)
	}
	return nil
}

func (c concurrencySetting) String() string {
	if c.Auto {
		return "auto"
	}
	return strconv.Itoa(c.N)
}

// perServer is the concurrency of a server whose own table sets tableN (0:
// none): its fixed limit, or, adaptive, its ceiling.
func (g *generate) perServer(tableN int) (limit, ceiling int) {
	switch {
	case tableN > 0:
		return tableN, 0
	case g.cfg.Concurrency.Auto:
		return 0, g.cfg.MaxConcurrency
	}
	return g.cfg.Concurrency.N, 0
}
