// Package memory is the agent's memory: a short-term memory of each open
// run loop, and a long-term memory of the run loops that ended.
//
// Short-term (ShortTerm) keeps, per open run loop, a bounded ring of its
// recent events and decisions as short lines, and a summary of what fell out
// of the ring, rewritten each time it overflows — extractively by default,
// by an LLM through the Summarizer interface when one is configured.
//
// Long-term (Store) is fed when a run loop ends: Segments cuts its events
// into segments (user_message, reasoning, tool_call, tool_result, response),
// each with an Anchor that points back into the run loop, and Store.Index
// keeps them in a SQLite file of its own (memory.db in the data folder).
// Store.Retrieve ranks them for a question by full text (FTS5, BM25) and,
// when an Embedder is configured (OpenAIEmbedder: any OpenAI-compatible
// /v1/embeddings), by vector similarity as well, the two rankings fused
// into one; Store.Expand turns an anchor back into the run loop around it.
// Every segment of an indexed run loop is kept, so an anchor always
// resolves.
//
// Every segment keeps its Provenance: whose words it holds (the user's,
// the agent's, or data from a tool, a process, an MCP server — also an
// agent's reply that quotes such data) and their source; RenderRecall
// fences data as quoted strings with source and task for a prompt. What
// the operator forgets (Forgetting: run loops, and segments by SegmentRef)
// Store.Forget removes, and Forgetting.Keep leaves out when a run loop is
// indexed again from the log.
//
// Whether the policy's reasoning (kairo.agent.thought) is kept at all is a
// setting, off by default: with it off, only the public actions, results and
// summaries of a run loop reach the disk.
//
// # Speed
//
// Retrieve answers in milliseconds over 100,000 segments (the benchmarks
// BenchmarkRetrieve/fulltext and /fused measure it). Two things make it
// so. FTS5's bm25() costs about a microsecond for each segment holding a
// query term, so the store counts how many segments hold each term and
// lets only the rarer terms find candidates; the common ones rescore those
// candidates in Go with BM25's formula (fulltext.go). And the vectors live
// in memory, in one slice, searched exactly up to 20,000 and by their signs
// first beyond (vector.go). Memory holds the vectors: 4 bytes a dimension
// a segment (100 MB for 100,000 segments of 256 dimensions); ask a model
// that can shorten its vectors for fewer dimensions (OpenAIConfig.Dimensions).
//
// # Quality
//
// BenchmarkRecall measures recall@5 over a labelled set of 252 questions
// about 154 run loops (testdata/recall.json, made by the generator in
// recall_test.go from the scenarios of scenario_test.go), by full text and
// fused with an embeddings endpoint in the test.
package memory
