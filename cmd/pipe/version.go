package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// versionCmd is pipe version; it has no flags.
type versionCmd struct{}

func init() {
	register(&command{
		Name:      "version",
		UsageLine: "pipe version",
		Short:     "print the version of pipe",
		New:       func() runner { return &versionCmd{} },
	})
}

func (*versionCmd) setFlags(*flag.FlagSet) {}

func (*versionCmd) run(_ context.Context, std *stdio, _ *flag.FlagSet) error {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v = "dev-" + s.Value[:12]
			}
		}
	}
	fmt.Fprintf(std.Out, "pipe %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
