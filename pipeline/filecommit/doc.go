// Package filecommit is pipe's second commit protocol, for outputs written as
// whole files (write-arrow's Parquet and Arrow IPC shards): a directory of
// part-NNNNN files, a manifest replaced atomically after each commit, and
// an id log (commitlog.IDLog) of the rows the directory holds, all under
// MetaDir. It checks committed shards against the manifest (Check), drops
// damaged ones for a rewrite (Set.Drop) and notes shards an upload moved
// elsewhere (MarkMoved). Line-oriented outputs use commitlog instead.
package filecommit
