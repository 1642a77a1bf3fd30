package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// openStream finds the stream, or creates it when there is none, retrying
// while the cluster is not ready. It never changes a stream that exists:
// what differs from the options is reported by Drift, and applied only by
// Apply. A stream whose subjects cannot take this store's
// messages is refused.
func (s *Store) openStream(ctx context.Context) error {
	attempt := min(s.opts.Timeout, s.opts.OpenTimeout)
	return retryOpen(ctx, s.opts.Logger, "find or create stream "+s.opts.Stream, attempt, func(ctx context.Context) error {
		n := s.denied.count()
		st, err := s.js.Stream(ctx, s.opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err = s.js.CreateStream(ctx, streamConfig(s.opts))
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				// Another host created it in between: look again.
				return fmt.Errorf("create stream %s: %w", s.opts.Stream, err)
			}
			if err != nil {
				if _, ok := s.denied.since(n); ok {
					// A host that may not create the stream waits for one that may.
					return fmt.Errorf("stream %s does not exist, and this host may not create it: start the host that serves it first, or create it (kairo store apply, on a host whose user may)", s.opts.Stream)
				}
				return s.checkDenied(n, "create stream "+s.opts.Stream, err)
			}
		} else if err != nil {
			return s.checkDenied(n, "look up stream "+s.opts.Stream, err)
		}
		cfg := st.CachedInfo().Config
		// This host's own subject is what it needs: a stream of the Kairo
		// before, on PREFIX.log alone, still serves a host of no name (one
		// host's store), and its drift says what apply would add.
		if !subjectCovers(cfg.Subjects, s.subject) {
			return &permanentError{fmt.Errorf("stream %s takes the subjects %s, not %s, where this host appends: run `kairo store apply` to set its subjects (or nats stream edit %s --subjects %s --subjects '%s.>')",
				s.opts.Stream, strings.Join(cfg.Subjects, ", "), s.subject, s.opts.Stream, s.logSubj, s.logSubj)}
		}
		if err := s.checkFormat(ctx, st); err != nil && !transient(err) {
			return &permanentError{err}
		} else if err != nil {
			return err
		}
		s.stream, s.drift = st, drift(s.opts, s.logSubj, cfg)
		return nil
	})
}

// streamConfig is the stream a store creates when there is none: the
// options, and the defaults for what they leave unset.
func streamConfig(opts Config) jetstream.StreamConfig {
	logSubj := opts.Prefix + ".log"
	replicas := max(opts.Replicas, 1)
	cfg := jetstream.StreamConfig{
		Name:        opts.Stream,
		Description: "Kairo's event bus",
		Subjects:    []string{logSubj, logSubj + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      opts.MaxAge,
		MaxBytes:    opts.MaxBytes,
		// A full stream refuses new events: dropping old ones would drop
		// what replay and deduplication stand on.
		Discard:    jetstream.DiscardNew,
		Duplicates: opts.DuplicateWindow,
		// A direct get may be answered by a replica that lags; with one
		// replica there is none, and it spares the leader's API.
		AllowDirect: replicas == 1,
	}
	if opts.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	return cfg
}

// drift is each difference between what the options set and the stream,
// as a sentence naming the setting, both values and how to apply it.
func drift(opts Config, logSubj string, cfg jetstream.StreamConfig) []string {
	var out []string
	differ := func(key, stream, want, edit string) {
		out = append(out, fmt.Sprintf("stream %s has %s %s, kairo.toml says %s: left as it is; `kairo store apply` applies kairo.toml (or nats stream edit %s %s)",
			opts.Stream, key, stream, want, opts.Stream, edit))
	}
	if opts.Replicas != 0 && opts.Replicas != cfg.Replicas {
		differ("replicas", fmt.Sprint(cfg.Replicas), fmt.Sprint(opts.Replicas), fmt.Sprintf("--replicas %d", opts.Replicas))
	}
	if opts.MaxBytes != 0 && opts.MaxBytes != cfg.MaxBytes {
		differ("max_bytes", bytesText(cfg.MaxBytes), bytesText(opts.MaxBytes), fmt.Sprintf("--max-bytes %d", opts.MaxBytes))
	}
	if opts.MaxAge != 0 && opts.MaxAge != cfg.MaxAge {
		differ("max_age", ageText(cfg.MaxAge), ageText(opts.MaxAge), "--max-age "+opts.MaxAge.String())
	}
	want := []string{logSubj, logSubj + ".>"}
	if got := slices.Sorted(slices.Values(cfg.Subjects)); !slices.Equal(got, want) {
		differ("subjects", strings.Join(cfg.Subjects, ", "), strings.Join(want, ", "), fmt.Sprintf("--subjects %s --subjects '%s.>'", logSubj, logSubj))
	}
	if cfg.Discard != jetstream.DiscardNew {
		// A full stream that drops its oldest events loses what replay
		// and deduplication stand on.
		differ("discard", "old", "new (a full stream refuses events, never drops stored ones)", "--discard new")
	}
	// Headers a host writes that act on what other hosts wrote: the
	// server carries them out whatever the host's permissions.
	if cfg.AllowRollup {
		out = append(out, fmt.Sprintf("stream %s allows Nats-Rollup headers: one host could purge what the others wrote; `kairo store apply` turns them off (or nats stream edit %s --no-allow-rollup)", opts.Stream, opts.Stream))
	}
	if cfg.AllowMsgSchedules {
		out = append(out, fmt.Sprintf("stream %s allows message schedules: the server publishes a scheduled message on the subject it names, which could be another host's; `kairo store apply` turns them off, or move the stream aside", opts.Stream))
	}
	return out
}

// applied is cfg with what the options set, and the list of what changed.
func applied(opts Config, cfg jetstream.StreamConfig) (jetstream.StreamConfig, []string) {
	var changes []string
	change := func(key, from, to string) {
		changes = append(changes, fmt.Sprintf("%s: %s → %s", key, from, to))
	}
	logSubj := opts.Prefix + ".log"
	if opts.Replicas != 0 && opts.Replicas != cfg.Replicas {
		change("replicas", fmt.Sprint(cfg.Replicas), fmt.Sprint(opts.Replicas))
		cfg.Replicas = opts.Replicas
		cfg.AllowDirect = opts.Replicas == 1 // as streamConfig chooses
	}
	if opts.MaxBytes != 0 && opts.MaxBytes != cfg.MaxBytes {
		change("max_bytes", bytesText(cfg.MaxBytes), bytesText(opts.MaxBytes))
		cfg.MaxBytes = opts.MaxBytes
	}
	if opts.MaxAge != 0 && opts.MaxAge != cfg.MaxAge {
		change("max_age", ageText(cfg.MaxAge), ageText(opts.MaxAge))
		cfg.MaxAge = opts.MaxAge
	}
	want := []string{logSubj, logSubj + ".>"}
	if got := slices.Sorted(slices.Values(cfg.Subjects)); !slices.Equal(got, want) {
		change("subjects", strings.Join(cfg.Subjects, ", "), strings.Join(want, ", "))
		cfg.Subjects = want
	}
	if cfg.Discard != jetstream.DiscardNew {
		change("discard", "old", "new")
		cfg.Discard = jetstream.DiscardNew
	}
	if cfg.AllowRollup {
		change("allow_rollup_hdrs", "true", "false")
		cfg.AllowRollup = false
	}
	if cfg.AllowMsgSchedules {
		change("allow_msg_schedules", "true", "false")
		cfg.AllowMsgSchedules = false
	}
	return cfg, changes
}

// Apply makes the stream what opts say: it creates it when there
// is none, else sets the replicas, max_bytes and max_age the options set
// (zero leaves a setting as it is), the store's subjects, discard new, and
// no rollup headers or message schedules, by which one host's message
// would act on the others'.
// It returns what it changed, one line each, or that it created the
// stream. An embedded store's server must not be running: Apply
// starts it, without listening, for the time of the change.
func Apply(ctx context.Context, opts Config) ([]string, error) {
	opts.Listen, opts.Peers, opts.AllowRemote = "", nil, false
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Store{opts: opts, logSubj: opts.Prefix + ".log", describe: describe(opts)}
	defer s.shut()
	if err := s.dial(ctx); err != nil {
		return nil, err
	}
	var out []string
	err := retryOpen(ctx, opts.Logger, "apply the settings of stream "+opts.Stream, min(opts.Timeout, opts.OpenTimeout), func(ctx context.Context) error {
		n := s.denied.count()
		st, err := s.js.Stream(ctx, opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			cfg := streamConfig(opts)
			if _, err := s.js.CreateStream(ctx, cfg); err != nil {
				return s.checkDenied(n, "create stream "+opts.Stream, err)
			}
			out = []string{fmt.Sprintf("created stream %s: subjects %s, replicas %d, max_bytes %s, max_age %s, discard new",
				opts.Stream, strings.Join(cfg.Subjects, ", "), cfg.Replicas, bytesText(cfg.MaxBytes), ageText(cfg.MaxAge))}
			return nil
		}
		if err != nil {
			return s.checkDenied(n, "look up stream "+opts.Stream, err)
		}
		cfg, changes := applied(opts, st.CachedInfo().Config)
		if len(changes) == 0 {
			out = nil
			return nil
		}
		if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
			return s.checkDenied(n, "update stream "+opts.Stream, err)
		}
		out = changes
		return nil
	})
	if err != nil {
		return nil, s.redact(fmt.Errorf("apply to %s: %w", s.describe, err))
	}
	return out, nil
}

// Drift is each setting of the options that differs from the stream the
// store found, as a sentence naming it, both values and the command that
// applies it; the stream was left as it is. A setting the options leave
// unset (zero) has no opinion and is not compared.
func (s *Store) Drift() []string { return slices.Clone(s.drift) }

// subjectCovers reports whether one of the patterns matches every subject
// that subject (a pattern itself) matches.
func subjectCovers(patterns []string, subject string) bool {
	want := strings.Split(subject, ".")
	for _, p := range patterns {
		have := strings.Split(p, ".")
		ok := true
		for i, t := range have {
			if t == ">" {
				break
			}
			if i >= len(want) || want[i] == ">" || (t != "*" && t != want[i]) || (t == "*" && want[i] == ">") {
				ok = false
				break
			}
			if i == len(have)-1 && len(want) != len(have) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func bytesText(n int64) string {
	if n <= 0 {
		return "none (no bound)"
	}
	for _, u := range []struct {
		unit string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func ageText(d time.Duration) string {
	if d <= 0 {
		return "none (kept for good)"
	}
	return d.String()
}
