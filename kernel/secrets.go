package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/kernel/proc"
	"github.com/kairo-os/kairo/kernel/secrets"
	"github.com/kairo-os/kairo/manifests"
)

// Secrets by handle. The operator keeps secrets in a store
// ([Config.Secrets]); a skill's manifest names the ones it may use and how
// it gets them ([secrets] env and files). The kernel reads each at the
// spawn that needs it — a secret changed while Kairo runs takes effect at
// the next spawn — and gives it to that spawn alone. Every value it gives
// joins the kernel's mask: from then on the output of the tree that holds
// it, and every event the bus stores, holds ***NAME*** where the value (or
// its base64 or hex form) would be. See docs/RATIONALE.md#secrets.

// Mask is raw msgpack (an event's data) with the secrets the kernel has
// given masked; raw itself when none is in it.
func (k *Kernel) Mask(raw []byte) []byte {
	if k.mask.Empty() {
		return raw
	}
	return k.mask.MaskMsgpack(raw)
}

// Masker is the kernel's mask, for the parts of the daemon that write
// outside the bus (its log file).
func (k *Kernel) Masker() *secrets.Masker { return k.mask }

// giveSecrets resolves the secrets skill's manifest names, and the handles
// ("secret:NAME") p's params and arguments hold, which it replaces with
// their values: a handle of a secret the manifest does not name is
// refused, as is any secret when the kernel has no store. nil: the run
// uses none.
func (k *Kernel) giveSecrets(skill *manifests.Skill, p *abi.SpawnParams) (*proc.Secrets, error) {
	return k.resolveSecrets("skill", skill.Skill.Name, skill.Secrets, p)
}

// SecretsFor resolves the secrets g names for a process the daemon starts
// itself on the operator's configuration (the MCP server name): what a
// skill's manifest gives a skill. nil: none.
func (k *Kernel) SecretsFor(name string, g manifests.SecretGrants) (*proc.Secrets, error) {
	return k.resolveSecrets("MCP server", name, g, &abi.SpawnParams{})
}

// RecordSecrets publishes that process id, started by the daemon, was
// given s.
func (k *Kernel) RecordSecrets(ctx context.Context, id, name string, s *proc.Secrets) {
	if s != nil {
		k.recordSecrets(ctx, id, name, "", s.Uses)
	}
}

// resolveSecrets is giveSecrets for kind name (a skill, an MCP server)
// whose grants are g.
func (k *Kernel) resolveSecrets(kind, name string, g manifests.SecretGrants, p *abi.SpawnParams) (*proc.Secrets, error) {
	names := g.Names()
	handles := handlesIn(p)
	if len(names) == 0 && len(handles) == 0 {
		return nil, nil
	}
	for _, h := range handles {
		if !slices.Contains(names, h) {
			return nil, abi.Errorf(abi.CodePermissionDenied,
				"permission denied: the %s %q may not use the secret %q: its [secrets] does not name it (add it to [secrets] env or files)", kind, name, h)
		}
	}
	if k.opts.Secrets == nil {
		return nil, abi.Errorf(abi.CodeUnavailable, "the %s %q uses secrets (%s), but this kernel has no secrets store", kind, name, strings.Join(names, ", "))
	}
	values := map[string][]byte{}
	get := func(secret string) ([]byte, error) {
		if v, ok := values[secret]; ok {
			return v, nil
		}
		v, err := k.opts.Secrets.Get(secret)
		if err != nil {
			if errors.Is(err, secrets.ErrNotFound) {
				return nil, abi.Errorf(abi.CodeNotFound, "the %s %q needs the secret %q, which is not set: kairo secrets set %s", kind, name, secret, secret)
			}
			return nil, abi.Errorf(abi.CodeUnavailable, "read the secret %q: %v", secret, err)
		}
		if _, err := k.mask.Add(secret, v); err != nil {
			return nil, abi.Errorf(abi.CodeInvalidParams, "the secret %q: %v", secret, err)
		}
		values[secret] = v
		return v, nil
	}
	s := &proc.Secrets{Children: g.Children}
	uses := &s.Uses
	for _, v := range slices.Sorted(maps.Keys(g.Env)) {
		secret := g.Env[v]
		val, err := get(secret)
		if err != nil {
			return nil, err
		}
		s.Env = append(s.Env, v+"="+string(val))
		*uses = append(*uses, abi.SecretUse{Name: secret, As: "env " + v})
	}
	for _, secret := range g.Files {
		val, err := get(secret)
		if err != nil {
			return nil, err
		}
		if s.Files == nil {
			s.Files = map[string][]byte{}
		}
		s.Files[secret] = val
		*uses = append(*uses, abi.SecretUse{Name: secret, As: "file $" + proc.EnvSecretsDir + "/" + secret})
	}
	// A handle in the params or the arguments is the value, for this run.
	for key, v := range p.Params {
		if secret, ok := secrets.Handle(v); ok {
			val, err := get(secret)
			if err != nil {
				return nil, err
			}
			p.Params[key] = string(val)
			*uses = append(*uses, abi.SecretUse{Name: secret, As: asParam + key})
		}
	}
	for i, a := range p.Argv {
		if secret, ok := secrets.Handle(a); ok {
			val, err := get(secret)
			if err != nil {
				return nil, err
			}
			p.Argv[i] = string(val)
			*uses = append(*uses, abi.SecretUse{Name: secret, As: fmt.Sprintf("%s%d", asArgument, i+1)})
		}
	}
	return s, nil
}

// handlesIn are the secrets a spawn's params and arguments name by handle.
func handlesIn(p *abi.SpawnParams) []string {
	var out []string
	for _, v := range p.Params {
		if name, ok := secrets.Handle(v); ok {
			out = append(out, name)
		}
	}
	for _, a := range p.Argv {
		if name, ok := secrets.Handle(a); ok {
			out = append(out, name)
		}
	}
	return out
}

// How a handle's use reads in kairo.secret.used: "param KEY", "argument N".
const (
	asParam    = "param "
	asArgument = "argument "
)

// inheritSecrets gives a spawn in parent's tree what parent holds when its
// manifest lets its children have them ([secrets] children), and the
// tree's mask either way: a child may have been handed a value by other
// means than the kernel. Of what a skill run by name was given by its own
// manifest, it keeps the values of the handles in its params and
// arguments (replaced already), with the mask and the record they need;
// its variables and files are not given.
func inheritSecrets(parent *proc.Session, spec *proc.Spec) {
	s, mask := parent.SecretsOf()
	var handles []abi.SecretUse
	if own := spec.Secrets; own != nil {
		for _, u := range own.Uses {
			if strings.HasPrefix(u.As, asParam) || strings.HasPrefix(u.As, asArgument) {
				handles = append(handles, u)
			}
		}
	}
	if spec.Mask == nil {
		spec.Mask = mask
	}
	switch {
	case s != nil && s.Children:
		given := *s
		given.Uses = append(slices.Clone(s.Uses), handles...)
		spec.Secrets = &given
	case len(handles) > 0:
		spec.Secrets = &proc.Secrets{Uses: handles}
	default:
		spec.Secrets = nil
	}
}

// secretsSource is the source of kairo.secret.used.
const secretsSource = abi.PrincipalKernel + "/secrets"

// recordSecrets publishes that the process id was given the secrets uses,
// one event each, never a value.
func (k *Kernel) recordSecrets(ctx context.Context, id, skill, corr string, uses []abi.SecretUse) {
	for _, u := range uses {
		u.ProcessID, u.Skill = id, skill
		raw, err := msgpack.Marshal(u)
		if err != nil {
			continue
		}
		ev := &abi.Event{Type: abi.SubjectSecretUsed, Source: secretsSource, CorrelationID: corr, Data: raw}
		if _, err := k.Bus.Publish(ctx, ev); err != nil && k.opts.Logger != nil {
			k.opts.Logger.Warn("record a secret's use", "process", id, "secret", u.Name, "err", err)
		}
	}
}
