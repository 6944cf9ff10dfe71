// Package pipefile reads pipeline files: TOML decoded with the position of
// every key (Load, Parse), [vars] and ${env:...} interpolated, --set,
// --shard and --from applied, and the [pipeline] settings (run directory,
// limits, shard, notify) checked. The stages' own keys are left as written:
// pipeline.Build decodes them against the stage kinds.
package pipefile
