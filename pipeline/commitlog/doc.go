// Package commitlog is pipe's one commit protocol: an append-only file of
// lines (JSONL) paired with an index that says, for every committed line, the
// 64-bit hash of its record id and where the line ends. The index is the
// commit point:
//
//	Append  → the line is written to the file in one write(2): it survives
//	          kill -9 (the page cache keeps it) but is pending, not committed
//	Commit  → fsync the data file, then append the pending index entries and
//	          fsync the index: from here the lines survive power loss too
//	Open    → read the index, cut a torn index entry; past the last
//	          committed line, adopt the whole lines a killed process left
//	          (each must yield its record id) and cut a torn tail; continue
//	          appending
//
// A failure (disk full, a bad write) never touches what was committed: the
// data past the last commit is cut the next time the log is opened. The same
// log serves the generation journal, the rejected/failed files of a run
// directory and the write-jsonl output; IDLog is the run's set of finished
// ids, a plain file of hashes. Directories of whole shard files have a
// protocol of their own, built on these: pipeline/filecommit.
package commitlog
