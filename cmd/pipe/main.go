// Command pipe runs TOML-declared dataflow pipelines for LLM training data.
package main

import "os"

func main() { os.Exit(Main()) }
