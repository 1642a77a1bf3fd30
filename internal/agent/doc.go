// Package agent is Kairo's agent runtime: a self-driven tick loop at a
// configured rate; an observation buffer that turns what arrived since the
// last tick into the tick's input; run loops (a user's goal, its actions and
// their results, one correlation chain) derived from the event log, never
// from a flag in memory; and the dispatch of what the policy plugin decides.
package agent
