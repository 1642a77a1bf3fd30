package host

import (
	"github.com/kairo-os/kairo/kernel/secrets"
	"github.com/kairo-os/kairo/manifests"
)

// openSecrets opens the operator's secrets store of home ([secrets] in
// kairo.toml): the kernel reads a skill's secrets from it at each spawn.
// nil without a home.
func openSecrets(home string, cfg manifests.Config) (*secrets.Store, error) {
	if home == "" {
		return nil, nil
	}
	return secrets.Open(cfg.SecretsPath(home), cfg.Secrets.Sources())
}
