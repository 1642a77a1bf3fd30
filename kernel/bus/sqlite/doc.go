// Package sqlite is the SQLite event store, the default: the log is one
// file (events.db) under the data folder that the sqlite3 CLI opens, and
// nothing else runs. Importing the package registers it with [bus.Register]
// as kind "sqlite"; [Open] opens a store without the registry, [Check] and
// [Salvage] read a damaged one. Why SQLite:
// docs/RATIONALE.md#sqlite-not-a-log-file-of-our-own; how the store keeps
// what it acknowledged: docs/RATIONALE.md#acknowledged-means-durable.
package sqlite
