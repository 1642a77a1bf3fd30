package manifests

import (
	"strings"
	"testing"
)

func TestEgressRulesAllow(t *testing.T) {
	r, err := ParseEgressRules([]string{
		"api.github.com:443",
		"*.pythonhosted.org",
		"Example.COM.:80",
		"127.0.0.1:8080",
		"[::1]:9000",
		"10.0.0.7",
		"xn--bcher-kva.example",
		"svc.internal:8443",
		"svc.internal:9443",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each denial sits beside a control that differs in one thing.
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"api.github.com", 443, true},
		{"api.github.com", 80, false}, // listed with a port: only that port
		{"API.GitHub.com.", 443, true},
		{"github.com", 443, false},
		{"evil.api.github.com", 443, false}, // not a wildcard entry

		{"files.pythonhosted.org", 443, true},
		{"files.pythonhosted.org", 80, true},
		{"files.pythonhosted.org", 8080, false}, // no port: 80 and 443 only
		{"a.b.pythonhosted.org", 443, true},     // more than one label
		{"pythonhosted.org", 443, false},        // never the bare suffix
		{"xpythonhosted.org", 443, false},       // a label boundary, not a string suffix
		{"pythonhosted.org.evil.com", 443, false},

		{"example.com", 80, true},
		{"example.com", 443, false},

		{"127.0.0.1", 8080, true},
		{"127.0.0.1", 8081, false},
		{"127.0.0.2", 8080, false},
		{"::ffff:127.0.0.1", 8080, true}, // the same address, mapped
		{"[::1]", 9000, true},
		{"::1", 9000, true},
		{"::1", 9001, false},
		{"10.0.0.7", 443, true},
		{"10.0.0.7", 22, false},

		{"xn--bcher-kva.example", 443, true},
		{"bücher.example", 443, false}, // compared as written, no IDNA mapping

		{"svc.internal", 8443, true}, // two entries for one host merge
		{"svc.internal", 9443, true},
		{"svc.internal", 443, false},

		{"api.github.com", 0, false},
		{"api.github.com", 70000, false},
		{"", 443, false},
	} {
		if got := r.Allow(c.host, c.port); got != c.want {
			t.Errorf("Allow(%q, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	var none *EgressRules
	if none.Allow("api.github.com", 443) {
		t.Error("nil EgressRules allowed a host")
	}
}

func TestParseEgressRulesErrors(t *testing.T) {
	for _, c := range []struct{ entry, says string }{
		{"", "empty"},
		{"*", "'*' is allowed only"},
		{"*.", "'*' is allowed only"},
		{"foo.*.com", "'*' is allowed only"},
		{"*foo.com", "'*' is allowed only"},
		{"api.github.com:0", "port \"0\""},
		{"api.github.com:https", "port \"https\""},
		{"api.github.com:65536", "port \"65536\""},
		{"bücher.example", "punycode"},
		{"a..b", "empty label"},
		{"-a.com", "starts or ends with '-'"},
		{"a b.com", "not allowed"},
		{"1.2.3", "looks like an IP address"},
		{"fe80::1%eth0", "zone"},
		{"::1:443", "IPv6 literal"}, // parses as an address: no error, see below
		{"[::1", "missing ]"},
		{"[example.com]:443", "not an IPv6 address"},
		{"http://example.com", "not a URL"},
		{"1::2::3", "more than one colon"},
	} {
		_, err := ParseEgressRules([]string{"ok.example", c.entry})
		if c.entry == "::1:443" { // a valid IPv6 address, not ::1 port 443
			if err != nil {
				t.Errorf("%q: %v", c.entry, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseEgressRules(%q) succeeded", c.entry)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.says) || !strings.Contains(msg, "*.suffix") {
			t.Errorf("ParseEgressRules(%q) error %q: want it to say %q and what is allowed", c.entry, msg, c.says)
		}
	}
	if _, err := ParseEgressRules([]string{"ok.example", " spaced.example:8080 ", "[::1]", "1.2.3.4:22"}); err != nil {
		t.Errorf("valid entries: %v", err)
	}
}

// TestCheckEgressEntry: one entry is checked as ParseEgressRules checks it, and the
// error names the entry and what an entry is, without ParseEgressRules' prefix.
func TestCheckEgressEntry(t *testing.T) {
	if err := CheckEgressEntry("api.github.com:443"); err != nil {
		t.Errorf("a valid entry: %v", err)
	}
	err := CheckEgressEntry("https://api.github.com")
	if err == nil || !strings.HasPrefix(err.Error(), `"https://api.github.com": `) || !strings.Contains(err.Error(), "not a URL") || !strings.Contains(err.Error(), "*.suffix") {
		t.Errorf("a URL: %v, want the entry, the reason and what an entry is", err)
	}
}

// TestEgressRulesCovers: an entry is covered when the rules allow every host
// and port it allows; each refusal beside the covered neighbour.
func TestEgressRulesCovers(t *testing.T) {
	r, err := ParseEgressRules([]string{"api.github.com:443", "*.pythonhosted.org", "example.com", "10.0.0.7:22"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		entry string
		want  bool
	}{
		{"api.github.com:443", true},
		{"api.github.com", false}, // 80 and 443, and 80 is not listed
		{"API.github.com.:443", true},
		{"example.com", true},
		{"example.com:80", true},
		{"example.com:8080", false},
		{"files.pythonhosted.org", true}, // a name under the wildcard
		{"*.pythonhosted.org", true},
		{"*.a.pythonhosted.org:443", true}, // a narrower wildcard
		{"*.pythonhosted.org:8443", false},
		{"pythonhosted.org", false}, // the bare suffix is not under it
		{"*.org", false},            // wider than the rules
		{"*.github.com:443", false}, // a name is not a wildcard
		{"10.0.0.7:22", true},
		{"10.0.0.7", false},
		{"not a host", false},
	} {
		if got := r.Covers(c.entry); got != c.want {
			t.Errorf("Covers(%q) = %v, want %v", c.entry, got, c.want)
		}
	}
	var none *EgressRules
	if none.Covers("example.com") {
		t.Error("nil rules cover an entry")
	}
}

// TestIsHostPort: one plain host and one port is grantable; a pattern, a
// missing or zero port, a zone or a space is not.
func TestIsHostPort(t *testing.T) {
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"api.github.com:443", true}, {"127.0.0.1:80", true}, {"[::1]:8080", true},
		{"*.com:443", false}, {"api.github.com", false}, {"api.github.com:0", false},
		{"[fe80::1%eth0]:443", false}, {"a b:443", false}, {"*:443", false},
	} {
		if got := IsHostPort(c.s); got != c.ok {
			t.Errorf("IsHostPort(%q) = %v, want %v", c.s, got, c.ok)
		}
	}
}
