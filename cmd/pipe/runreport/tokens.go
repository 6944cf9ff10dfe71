package runreport

import (
	"maps"
	"slices"
)

// tokenRates are output tokens per second over time: the fleet's (every
// stage with one, summed) and each server's, from the timeline's points
// (runs before this pipe version recorded no tokens: none).
func tokenRates(points []Point) []Series {
	if len(points) < 2 {
		return nil
	}
	servers := map[string]bool{}
	any := false
	for _, p := range points {
		for _, s := range p.Stages {
			any = any || s.Tokens > 0
			for name := range s.ServerTokens {
				servers[name] = true
			}
		}
	}
	if !any {
		return nil
	}
	all := func(PointStage) bool { return true }
	out := []Series{{Name: "all servers", Points: rates(points, rateLine{count: func(s PointStage) int64 { return s.Tokens }, keep: all})}}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		out = append(out, Series{Name: name, Points: rates(points, rateLine{count: func(s PointStage) int64 { return s.ServerTokens[name] }, keep: all})})
	}
	return out
}

// concurrencyLimits are each server's concurrency limit over time, from the
// timeline's points (issue 21: what concurrency = "auto" chose, and when;
// runs before this pipe version recorded none). A server's value at a point
// is the sum over the stages that use it.
func concurrencyLimits(points []Point) []Series {
	byServer := map[string][]XY{}
	for _, p := range points {
		at := map[string]float64{}
		for _, s := range p.Stages {
			for name, n := range s.ServerLimits {
				at[name] += float64(n)
			}
		}
		for name, n := range at {
			byServer[name] = append(byServer[name], XY{p.T, n})
		}
	}
	var out []Series
	for _, name := range slices.Sorted(maps.Keys(byServer)) {
		if len(byServer[name]) >= 2 {
			out = append(out, Series{Name: name, Points: byServer[name]})
		}
	}
	return out
}
