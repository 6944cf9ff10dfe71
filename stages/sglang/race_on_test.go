//go:build race

package sglang

// raceDetector: the tests run under the race detector (go test -race),
// whose slowdown turns latencies into noise.
const raceDetector = true
