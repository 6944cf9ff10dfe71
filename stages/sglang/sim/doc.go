// Package sim is a simulated SGLang fleet: real HTTP servers on loopback that
// speak SGLang's wire protocol (/generate, /v1/chat/completions, the health,
// model and server info routes, /metrics; streaming, API keys, SGLang's
// error bodies) and behave like GPU servers under load (a batch that speeds
// up and saturates, a bounded queue, KV-cache retraction), with outputs
// that are a function of the request and Config.Seed: for tests, demos and
// rehearsals without a GPU. protocol.go describes the endpoints, the
// timing, the outputs and what is not simulated.
//
//	f, err := sim.Start(ctx, sim.Config{Count: 7, Speed: 100})
//	defer f.Close()
//	urls := f.URLs() // "http://127.0.0.1:PORT", one per server
package sim
