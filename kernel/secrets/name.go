package secrets

import (
	"fmt"
	"strings"
)

// Bounds of a secret's value. A shorter value is refused: masking it would
// mask common words in everything the agent reads. A longer one is not a
// secret but a file.
const (
	MinLen = 6
	MaxLen = 64 << 10
)

// maxName is the longest secret name.
const maxName = 64

// HandlePrefix starts a handle: "secret:deploy" names the secret deploy.
const HandlePrefix = "secret:"

// ValidName checks a secret's name: 1 to 64 of the lower-case letters,
// digits, "_", "." and "-", starting with a letter or a digit. The name is
// a file name in the store and is printed as ***NAME***, so it holds
// nothing a shell, a path or a terminal would read otherwise.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("a secret's name is empty; give one such as %q", "deploy-token")
	}
	if len(name) > maxName {
		return fmt.Errorf("the secret name %.20q... is %d bytes long; a name is at most %d, such as %q", name, len(name), maxName, "deploy-token")
	}
	if !nameStart(name[0]) || strings.IndexFunc(name, func(r rune) bool { return r > 0x7f || !nameByte(byte(r)) }) >= 0 {
		return fmt.Errorf("%q is not a secret name: use lower-case letters, digits, \"_\", \".\" and \"-\", starting with a letter or a digit, such as %q", name, "deploy-token")
	}
	return nil
}

func nameStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func nameByte(c byte) bool { return nameStart(c) || c == '_' || c == '.' || c == '-' }

// Handle reads a handle, "secret:NAME": it returns NAME and true when s is
// one with a valid name, else "" and false.
func Handle(s string) (name string, ok bool) {
	name, ok = strings.CutPrefix(s, HandlePrefix)
	if !ok || ValidName(name) != nil {
		return "", false
	}
	return name, true
}
