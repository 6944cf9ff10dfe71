// Package trainers reads pipe's outputs the way the trainers that consume
// them do, by their own rules written again in Go, for tests: which files
// HF datasets' load_dataset takes from a directory (DataFiles), and what
// SpecForge's loader makes of a JSONL file (LoadSpecForge). It is written
// from the trainers' sources, cited rule by rule, and shares no code with
// the writers it checks.
package trainers

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Rules of huggingface/datasets src/datasets/data_files.py (fsspec >=
// 2023.12.0 branch of the patterns).
var (
	// SPLIT_PATTERN_SHARDED, tried first (_get_data_files_patterns).
	splitPatternSharded = "data/{split}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*"
	// shardedSplit is string_to_dict of a file's base name against the
	// pattern's: the split is what comes before -NNNNN-of-NNNNN.
	shardedSplit = regexp.MustCompile(`^(.+)-[0-9]{5}-of-[0-9]{5}.*\..*$`)
	// _split_re: a split name is words joined by dots.
	splitRe = regexp.MustCompile(`^\w+(\.\w+)*$`)
	// SPLIT_KEYWORDS, in DEFAULT_SPLITS order.
	splitKeywords = []struct {
		split    string
		keywords []string
	}{
		{"train", []string{"train", "training"}},
		{"validation", []string{"validation", "valid", "dev", "val"}},
		{"test", []string{"test", "testing", "eval", "evaluation"}},
	}
	nonWordsChars = "-._ 0-9" // NON_WORDS_CHARS
	// KEYWORDS_IN_FILENAME_BASE_PATTERNS, KEYWORDS_IN_DIR_NAME_BASE_PATTERNS.
	keywordsInFilename = []string{"**/{keyword}[{sep}]*", "**/*[{sep}]{keyword}[{sep}]*"}
	keywordsInDirName  = []string{"**/{keyword}/**", "**/{keyword}[{sep}]*/**", "**/*[{sep}]{keyword}/**", "**/*[{sep}]{keyword}[{sep}]*/**"}
	// FILES_TO_IGNORE.
	filesToIgnore = []string{"README.md", "config.json", "dataset_info.json", "dataset_infos.json", "dummy_data.zip", "dataset_dict.json"}
)

// splitPatterns is one dict of ALL_DEFAULT_PATTERNS: split → patterns.
type splitPatterns struct {
	split    string
	patterns []string
}

// allDefaultPatterns is ALL_DEFAULT_PATTERNS: DEFAULT_PATTERNS_LOGS,
// DEFAULT_PATTERNS_SPLIT_IN_DIR_NAME, DEFAULT_PATTERNS_SPLIT_IN_FILENAME,
// DEFAULT_PATTERNS_ALL.
func allDefaultPatterns() [][]splitPatterns {
	byKeyword := func(base []string) []splitPatterns {
		var out []splitPatterns
		for _, sk := range splitKeywords {
			sp := splitPatterns{split: sk.split}
			for _, kw := range sk.keywords {
				for _, b := range base {
					sp.patterns = append(sp.patterns, strings.NewReplacer("{keyword}", kw, "{sep}", nonWordsChars).Replace(b))
				}
			}
			out = append(out, sp)
		}
		return out
	}
	return [][]splitPatterns{
		{{"logs", []string{"**/*.eval"}}},
		byKeyword(keywordsInDirName),
		byKeyword(keywordsInFilename),
		{{"train", []string{"**"}}},
	}
}

// DataFiles is what load_dataset(base) and load_dataset("parquet",
// data_dir=base) take from a local directory: split → files (relative to
// base, sorted), by get_data_patterns / _get_data_files_patterns (the
// first patterns that resolve to any file win) and resolve_pattern (files
// only; FILES_TO_IGNORE dropped; _is_inside_unrequested_special_dir and
// _is_unrequested_hidden_file_or_is_inside_unrequested_hidden_dir).
func DataFiles(base string) (map[string][]string, error) {
	all, err := localFiles(base)
	if err != nil {
		return nil, err
	}
	if files := all.resolve(strings.ReplaceAll(splitPatternSharded, "{split}", "*")); len(files) > 0 {
		// Each split found in the names takes the files of its own
		// pattern, data/{split}-NNNNN-of-NNNNN*.*.
		out := map[string][]string{}
		for _, f := range files {
			m := shardedSplit.FindStringSubmatch(path.Base(f))
			if m == nil || !splitRe.MatchString(m[1]) {
				return nil, fmt.Errorf("%s: split name of %s should match %s (ValueError)", base, f, splitRe)
			}
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = all.resolve(strings.ReplaceAll(splitPatternSharded, "{split}", m[1]))
			}
		}
		return out, nil
	}
	for _, dict := range allDefaultPatterns() {
		if out := all.splits(dict); len(out) > 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: no data files (EmptyDatasetError)", base)
}

// fileList is the files under a directory, relative to it with slashes,
// sorted.
type fileList []string

func localFiles(base string) (fileList, error) {
	var all fileList
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(base, p)
			all = append(all, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(all)
	return all, err
}

// resolve is resolve_pattern: the files pattern matches, less the ignored
// ones and those in special or hidden directories the pattern does not
// name.
func (all fileList) resolve(pattern string) []string {
	re := globRegexp(pattern)
	var out []string
	for _, f := range all {
		if !re.MatchString(f) || slices.Contains(filesToIgnore, path.Base(f)) ||
			specialDirs(path.Dir(f)) != specialDirs(path.Dir(pattern)) || hiddenParts(f) != hiddenParts(pattern) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// splits is DataFilesDict.from_patterns over one dict of patterns: each
// split any of whose patterns resolves, with the files all its patterns
// resolve to, sorted.
func (all fileList) splits(dict []splitPatterns) map[string][]string {
	out := map[string][]string{}
	for _, sp := range dict {
		set := map[string]bool{}
		for _, p := range sp.patterns {
			for _, f := range all.resolve(p) {
				set[f] = true
			}
		}
		if len(set) > 0 {
			out[sp.split] = slices.Sorted(maps.Keys(set))
		}
	}
	return out
}

// specialDirs counts the parts starting with "__" (the parent's parts, as
// _is_inside_unrequested_special_dir counts them).
func specialDirs(dir string) int {
	n := 0
	for _, p := range strings.Split(dir, "/") {
		if strings.HasPrefix(p, "__") {
			n++
		}
	}
	return n
}

// hiddenParts counts the parts starting with "." that are not all dots.
func hiddenParts(p string) int {
	n := 0
	for _, part := range strings.Split(p, "/") {
		if strings.HasPrefix(part, ".") && strings.Trim(part, ".") != "" {
			n++
		}
	}
	return n
}

// globRegexp is fsspec's glob (>= 2023.12.0, Python glob semantics with
// recursive "**" and hidden files matched): "**" as a whole part matches
// any number of parts, "*" anything but "/", "[...]" a class.
func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	parts := strings.Split(pattern, "/")
	for i, part := range parts {
		last := i == len(parts)-1
		if part == "**" {
			if last {
				b.WriteString(".*")
			} else {
				b.WriteString("(?:[^/]*/)*")
			}
			continue
		}
		for k := 0; k < len(part); k++ {
			switch c := part[k]; c {
			case '*':
				b.WriteString("[^/]*")
			case '?':
				b.WriteString("[^/]")
			case '[':
				end := strings.IndexByte(part[k:], ']')
				if end < 0 {
					b.WriteString(`\[`)
					continue
				}
				class := part[k+1 : k+end]
				b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
				k += end
			default:
				b.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		if !last {
			b.WriteString("/")
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
