// Package sqlite is the SQLite event store, the default: the log is one
// file (events.db) under the data folder that the sqlite3 CLI opens, and
// nothing else runs. Importing the package registers it with [bus.Register]
// as kind "sqlite"; [Open] opens a store without the registry, [Check] and
// [Salvage] read a damaged one. docs/RATIONALE.md says why SQLite, and how
// the store keeps what it acknowledged.
package sqlite
