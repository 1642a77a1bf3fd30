package wasm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/bus"
	"github.com/kairo-os/kairo/kernel/bus/checkpoint"
)

// grantFoldVersion is the version of the grants' checkpoint: a change of
// what the fold keeps, or of how it reads an event, bumps it, so that a
// checkpoint of the old fold is refused and the log folded again.
const grantFoldVersion = 1

// grantCheckpointEvery is how often the grants' checkpoint folds the log's
// new events and is saved, besides at Stop.
const grantCheckpointEvery = time.Minute

// grantLog is the fold of the operator's grant events: what the log grants
// each plugin now. It is what is live, nothing of what ended: a revoked
// entry leaves it. Why: docs/RATIONALE.md#a-start-reads-what-is-live.
type grantLog struct {
	Plugins map[string]*abi.PluginGrant `msgpack:"plugins"`
	// From names, for each entry a plugin is granted ("call m.x"), the seq
	// of the kairo.plugin.granted that granted it last: a loaded checkpoint
	// is checked against those events.
	From map[string]map[string]uint64 `msgpack:"from"`
}

// grantEntries are g's entries, each as grantLog.From names it.
func grantEntries(g *abi.PluginGrant) []string {
	var out []string
	for _, l := range []struct {
		key string
		v   []string
	}{{"call", g.Call}, {"publish", g.Publish}, {"subscribe", g.Subscribe}, {"fs", g.WASIFS}, {"env", g.WASIEnv}} {
		for _, e := range l.v {
			out = append(out, l.key+" "+e)
		}
	}
	return out
}

// apply folds ev, a grant or revoke event, if this host recorded it; an
// event of it that does not decode is skipped, and returned.
func (l *grantLog) apply(ev *abi.Event, host string) error {
	if ev.Source != abi.PrincipalHost || ev.Host != host {
		// Only the host records grants, and each host its own: an
		// operator's grant on one host of a shared store is not the
		// operator's word on another.
		return nil
	}
	var g abi.PluginGrant
	if err := msgpack.Unmarshal(ev.Data, &g); err != nil || g.Plugin == "" {
		return cmp.Or(err, errors.New("no plugin named"))
	}
	if l.Plugins == nil {
		l.Plugins, l.From = map[string]*abi.PluginGrant{}, map[string]map[string]uint64{}
	}
	revoke := ev.Type == subjectRevoked
	foldGrant(l.Plugins, &g, revoke)
	from := l.From[g.Plugin]
	if from == nil {
		from = map[string]uint64{}
		l.From[g.Plugin] = from
	}
	for _, e := range grantEntries(&g) {
		if revoke {
			delete(from, e)
		} else {
			from[e] = ev.Seq
		}
	}
	if len(from) == 0 {
		delete(l.From, g.Plugin)
		delete(l.Plugins, g.Plugin)
	}
	return nil
}

var grantSubjects = []*abi.Pattern{abi.MustCompilePattern(subjectGranted), abi.MustCompilePattern(subjectRevoked)}

// grantFold is the fold of the grants kept in their checkpoint.
func (m *Manager) grantFold() *checkpoint.Fold[grantLog] {
	b := m.cfg.Kernel.Bus
	f := &checkpoint.Fold[grantLog]{
		Bus: b, Version: grantFoldVersion, Subjects: grantSubjects, Logger: m.log,
		Apply: func(l *grantLog, ev *abi.Event) {
			if err := l.apply(ev, b.Host()); err != nil {
				m.log.Warn("a grant event that does not decode is skipped", "seq", ev.Seq, "subject", ev.Type, "err", err)
			}
		},
		Verify: func(ctx context.Context, l *grantLog) error { return verifyGrants(ctx, b, l) },
	}
	if m.cfg.Checkpoints != "" {
		f.Path = filepath.Join(m.cfg.Checkpoints, "grants.ckp")
	}
	return f
}

// verifyGrants checks every entry a checkpoint grants against the event it
// names: a kairo.plugin.granted this host recorded, for that plugin, that
// grants it. A checkpoint is a cache: whoever could plant one (the data
// folder's own user: checkpoint.Load refuses one others may write) cannot
// grant a plugin what the log never did.
func verifyGrants(ctx context.Context, b *bus.Bus, l *grantLog) error {
	type entry struct{ plugin, e string }
	bySeq := map[uint64][]entry{}
	for name, g := range l.Plugins {
		for _, e := range grantEntries(g) {
			seq, ok := l.From[name][e]
			if !ok {
				return fmt.Errorf("plugin %s: %s names no event", name, e)
			}
			bySeq[seq] = append(bySeq[seq], entry{name, e})
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		var g abi.PluginGrant
		found := false
		err := b.Replay(ctx, bus.Query{FromSeq: seq, ToSeq: seq, Limit: 1}, func(ev *abi.Event) error {
			found = ev.Seq == seq && ev.Type == subjectGranted && ev.Source == abi.PrincipalHost && ev.Host == b.Host() &&
				msgpack.Unmarshal(ev.Data, &g) == nil
			return bus.ErrStop
		})
		if err != nil && !errors.Is(err, bus.ErrStop) {
			return err
		}
		for _, w := range bySeq[seq] {
			if !found || g.Plugin != w.plugin || !slices.Contains(grantEntries(&g), w.e) {
				return fmt.Errorf("plugin %s: %s: the log's event %d does not grant it", w.plugin, w.e, seq)
			}
		}
	}
	return nil
}
