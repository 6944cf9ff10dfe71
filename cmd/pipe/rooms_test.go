package main

import (
	"go/types"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// roomOf is the command whose room file is (NAME.go or NAME_*.go for a
// registered command NAME), or "" for a shared file (the dispatcher, the
// plan loader, the live display): what a command's files declare is that
// command's, and what two commands share is in a shared file or in a
// package of cmd/pipe/internal.
func roomOf(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), ".go")
	for name := range commands {
		if base == name || strings.HasPrefix(base, name+"_") {
			return name
		}
	}
	return ""
}

// Each command's files hold that command: no file reaches into another
// command's file for a helper (the go command's shape, issue 46). The
// package is type-checked, so a name is what it refers to, not its
// spelling.
func TestCommandsKeepToTheirRooms(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: type-checks the package")
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo, Dir: "."}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 || len(pkgs) != 1 {
		t.Fatal("cannot load cmd/pipe")
	}
	p := pkgs[0]
	declFile := func(obj types.Object) string {
		return filepath.Base(p.Fset.Position(obj.Pos()).Filename)
	}
	seen := map[string]bool{}
	var bad []string
	for _, f := range p.Syntax {
		useFile := filepath.Base(p.Fset.Position(f.Pos()).Filename)
		if strings.HasSuffix(useFile, "_test.go") {
			continue
		}
		for id, obj := range p.TypesInfo.Uses {
			if p.Fset.Position(id.Pos()).Filename != p.Fset.Position(f.Pos()).Filename || obj.Pkg() != p.Types {
				continue
			}
			if _, isVar := obj.(*types.Var); isVar && obj.Parent() != p.Types.Scope() {
				continue // a field or a local
			}
			if obj.Parent() != nil && obj.Parent() != p.Types.Scope() {
				continue // a local
			}
			from := declFile(obj)
			room := roomOf(from)
			if room == "" || room == roomOf(useFile) || strings.HasSuffix(from, "_test.go") {
				continue
			}
			k := useFile + " uses " + obj.Name() + " of " + from + " (pipe " + room + "'s room)"
			if !seen[k] {
				seen[k] = true
				bad = append(bad, k)
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d uses of a command's helper outside its room:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	if !slices.ContainsFunc(p.GoFiles, func(f string) bool { return roomOf(f) == "run" }) {
		t.Error("no file is pipe run's: the rooms are not found")
	}
}
